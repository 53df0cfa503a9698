"""Which devices a sweep shares out, how many devices a run asks for, and which sweep jobs may ask for several.

A device pool is what automatic placement leases: the visible CUDA GPUs when the run may use them; else Apple's
GPU (one MPS device) when the run may use it; on a CPU-only machine (or ``trainer.accelerator=cpu``)
``sweep.cpu_jobs`` slots that divide the cores; or, for tests, ``sweep.simulate_devices`` pretend devices (jobs
lease them but still train on the CPU).

``sweep.jobs_per_device`` (k) packs several small jobs on one accelerator: the pool then has k leases per device,
one per slot, listed slot by slot (every device's slot 0, then every device's slot 1, ...), so jobs spread over
the devices before any device takes a second one. A CPU pool's slots are ``sweep.cpu_jobs`` already.

A sweep job on several devices is refused unless a cluster starts its processes. Lightning's ``strategy=ddp``
starts ranks 1..N-1 by running the script's command line again (adding Hydra's run dir). For a single run that is
sound; in a multirun the command line is the whole sweep, so every extra rank would launch the sweep again
(Lightning #11300). A sweep job may use several devices only when a cluster starts one process per device itself:
SLURM with one task per device, or torchrun. docs/sweeps.md.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hydra.types import RunMode

from tinygpt.common.errors import ConfigError

CUDA_ACCELERATORS = ("auto", "gpu", "cuda")
MPS_ACCELERATORS = ("auto", "gpu", "mps")


@dataclass(frozen=True)
class DevicePool:
    kind: str  # "cuda", "mps", "cpu" or "simulated"
    devices: tuple[str, ...]  # the devices, named uniquely on this machine (see cuda_device_names)
    slots: int = 1  # leases per device (sweep.jobs_per_device)

    @property
    def names(self) -> tuple[str, ...]:
        """Lease names, slot by slot: a device's name alone with one slot, else ``<device>.slot<i>``."""
        if self.slots == 1:
            return self.devices
        return tuple(f"{device}.slot{slot}" for slot in range(self.slots) for device in self.devices)

    def device_of(self, lease_index: int) -> int:
        """The index of the device that lease ``lease_index`` (an index of ``names``) is on."""
        return lease_index % len(self.devices)

    def slot_of(self, lease_index: int) -> int:
        return lease_index // len(self.devices)

    def __len__(self) -> int:
        return len(self.names)


def cuda_device_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def mps_available() -> bool:
    import torch

    return torch.backends.mps.is_available()


def cuda_device_names(count: int) -> tuple[str, ...]:
    """Lease names of CUDA devices 0..count-1 as this process sees them, named by the physical device that
    CUDA_VISIBLE_DEVICES maps them to, so two sweeps given different GPUs do not wait for each other."""
    visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    physical = visible[:count] if len(visible) >= count else [str(i) for i in range(count)]
    return tuple("cuda-" + re.sub(r"[^A-Za-z0-9_.-]", "_", device) for device in physical)


def device_pool(
    accelerator: str, cpu_jobs: int, simulate_devices: int | None = None, jobs_per_device: int = 1
) -> DevicePool:
    if int(jobs_per_device) < 1:
        raise ConfigError(f"sweep.jobs_per_device={jobs_per_device}: must be at least 1")
    if simulate_devices:
        return DevicePool("simulated", tuple(f"sim-{i}" for i in range(int(simulate_devices))), int(jobs_per_device))
    gpus = cuda_device_count() if str(accelerator) in CUDA_ACCELERATORS else 0
    if gpus:
        return DevicePool("cuda", cuda_device_names(gpus), int(jobs_per_device))
    if str(accelerator) in MPS_ACCELERATORS and mps_available():  # a Mac: its one GPU, k jobs on it
        return DevicePool("mps", ("mps-0",), int(jobs_per_device))
    if int(cpu_jobs) < 1:
        raise ConfigError(f"sweep.cpu_jobs={cpu_jobs}: must be at least 1")
    return DevicePool("cpu", tuple(f"cpu-{i}" for i in range(int(cpu_jobs))))


def parallel_jobs(
    accelerator: str, cpu_jobs: int, simulate_devices: int | None = None, jobs_per_device: int = 1
) -> int:
    """Jobs to run at once: one per lease of the pool (the ``tinygpt.parallel_jobs`` resolver)."""
    return len(device_pool(accelerator, cpu_jobs, simulate_devices, jobs_per_device))


def cpu_cores() -> int:
    """Cores this process may run on (the affinity mask, which containers and SLURM restrict)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def requested_devices(devices: int | str | Sequence[int]) -> int | None:
    """How many devices ``trainer.devices`` asks for, in Lightning's notation: an int, a list of indices, or a
    string ("2", "0,1"); None for every available device ("auto", -1)."""
    if isinstance(devices, str):
        text = devices.strip()
        if text in ("auto", "-1"):
            return None
        if "," in text:
            return len([part for part in text.split(",") if part.strip()])
        return int(text)
    if isinstance(devices, int):
        return None if devices == -1 else devices
    return len(list(devices))


def device_count(devices: int | str | Sequence[int]) -> int:
    """The number of devices a run asks for, where it must be explicit (the ``tinygpt.device_count`` resolver,
    e.g. one SLURM task per device)."""
    count = requested_devices(devices)
    if count is None:
        raise ConfigError(f"trainer.devices={devices!r}: set it to a number of devices here (e.g. trainer.devices=4)")
    return count


def is_device_list(devices) -> bool:
    """Whether ``trainer.devices`` names devices by index ([0], "1,"), i.e. the user chose which ones."""
    return (isinstance(devices, str) and "," in devices) or not isinstance(devices, (int, str))


def refuse_multi_device_jobs_in_sweep(mode: RunMode, trainer: Mapping) -> None:
    """Raises ConfigError for a multirun job that asks for several devices whose processes Lightning would
    start itself (see the module docstring)."""
    if mode != RunMode.MULTIRUN:
        return
    count = requested_devices(trainer["devices"])
    if count is None:
        count = max(cuda_device_count(), 1) if str(trainer["accelerator"]) in CUDA_ACCELERATORS else 1
    from lightning.fabric.plugins.environments import SLURMEnvironment, TorchElasticEnvironment  # only here

    world_size = count * int(trainer.get("num_nodes", 1))
    # whether a cluster, not Lightning, starts the DDP processes (Lightning's own SLURM and torchrun checks)
    if count <= 1 or TorchElasticEnvironment.detect():
        return
    if SLURMEnvironment.detect() and int(os.environ.get("SLURM_NTASKS", "0")) == world_size:
        return
    raise ConfigError(
        f"trainer.devices={trainer['devices']} in a multirun: one sweep job runs on one device (Lightning would "
        "start the extra DDP processes by rerunning the whole sweep command, Lightning #11300). Use "
        "trainer=ddp for a single run (no -m), or hydra/launcher=slurm with one SLURM task per device "
        "(docs/sweeps.md)."
    )
