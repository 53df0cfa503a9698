"""Automatic placement of sweep jobs, one job per device: a Hydra callback around each job.

A multirun's default launcher (conf/hydra/launcher/placement.yaml) is Hydra's joblib launcher with one worker
per device. Joblib does no placement: without help every job would see every GPU and Lightning's
``devices=1`` would put them all on GPU 0. ``DevicePlacement`` (listed in ``hydra.callbacks``) runs inside each
job's process, just before and after the job:

- ``on_job_start`` leases a free device (leases.py: an OS file lock, so never two jobs on one device, and a
  crashed job's device comes back by itself), divides the CPU cores between the parallel jobs
  (``torch.set_num_threads``) and writes ``placement.json`` into the job's folder. A finished job that a
  rerun skips (``is_finished_and_skipped``) gets neither: it trains nothing, so it must not hold a device
  another sweep is waiting for, and its placement.json keeps saying where it did train;
- ``train()`` then pins the Trainer to the leased GPU (``apply_placement``);
- ``on_job_end`` releases the lease, whether the job finished or failed.

Placement only acts in a multirun under the placement launcher, and only for jobs that ask for one device
(``trainer.devices=1``, the default): an explicit device list, or another launcher (``hydra/launcher=basic``,
``slurm``), is the user's choice and is left alone.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from tinygpt.common.files import write_json_atomic
from tinygpt.common.run_folder import is_finished_and_skipped, placement_path, read_record
from tinygpt.common.say import PREFIX, say
from tinygpt.launch.devices import (
    cpu_cores,
    device_pool,
    is_device_list,
    refuse_multi_device_jobs_in_sweep,
    requested_devices,
)
from tinygpt.launch.leases import Lease, acquire
from tinygpt.launch.orphans import die_with_parent, exit_if_orphaned
from tinygpt.launch.packing import AUTO, PLAN, decide, job_footprint, jobs_per_device, write_plan

R = TypeVar("R")  # a parsed run (tinygpt/train/schema.py's RunConfig: this package stands below it)

PLACEMENT_LAUNCHER = "placement"  # the option of hydra/launcher that turns placement on


@dataclass
class Placement:
    lease: Lease
    kind: str  # "cuda", "mps", "cpu" or "simulated"
    device: int  # the index of the leased device (several leases share one with sweep.jobs_per_device)
    threads: int
    threads_before: int
    record_path: Path
    record: dict


# The placement of the job running in this process. A launcher runs one job at a time per process (joblib
# reuses its worker processes for later jobs, which is why on_job_start first releases any leftover).
_current: Placement | None = None
# This process's job is a finished one being skipped: placement applies but leased nothing, on purpose.
_skipping = False


def default_lease_dir() -> Path:
    """Machine-wide (per user), because the devices are: two sweeps started side by side share the GPUs
    instead of both putting their first job on GPU 0."""
    return Path(tempfile.gettempdir()) / f"tinygpt-device-leases-{os.getuid()}"


def parallel_jobs_of(n_jobs: int) -> int:
    """Jobs joblib runs at once for ``n_jobs`` (negative: all cores but ``-n_jobs - 1``, joblib's rule)."""
    return n_jobs if n_jobs > 0 else max(1, (os.cpu_count() or 1) + 1 + n_jobs)


def placement_applies(hydra: DictConfig, trainer: Mapping) -> bool:
    """hydra: the job's ``hydra`` node; trainer: its Trainer arguments (the ``trainer`` node, or a parsed run's)."""
    return (
        hydra.mode == RunMode.MULTIRUN
        and hydra.runtime.choices.get("hydra/launcher") == PLACEMENT_LAUNCHER
        and not is_device_list(trainer["devices"])
        and requested_devices(trainer["devices"]) == 1
    )


class DevicePlacement(Callback):
    """Hydra callback (``hydra.callbacks.device_placement``); see the module docstring. Hydra turns exceptions
    raised in callbacks into warnings, so the checks that must stop a job live in ``apply_placement``."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """In the launching process, before the launcher is built: ``sweep.jobs_per_device=auto`` decided once
        for the whole multirun (tinygpt/launch/packing.py)."""
        if str(config.sweep.get("jobs_per_device", 1)) != AUTO:
            return
        if config.hydra.runtime.choices.get("hydra/launcher") != PLACEMENT_LAUNCHER:
            return
        sweep = config.sweep
        # a plan from an earlier launch must not outlive a decision that fails now (Hydra turns a callback's
        # exception into a warning; the launcher's n_jobs then stops the multirun, naming the missing plan)
        (Path(config.hydra.sweep.dir) / PLAN).unlink(missing_ok=True)
        pool = device_pool(config.trainer.accelerator, sweep.cpu_jobs, sweep.simulate_devices)
        plan = decide(config, pool)
        write_plan(config.hydra.sweep.dir, plan)
        # printed, not logged: in the launching process Hydra's own logging would print the line a second time
        print(PREFIX + plan["why"], flush=True)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        die_with_parent()  # a worker of a killed launcher stops instead of training on (orphans.py)
        release()
        if placement_applies(config.hydra, config.trainer):
            place(config)

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        release()
        exit_if_orphaned()


def place(config: DictConfig) -> Placement | None:
    """Lease a device for this job and record it; None for a finished job the rerun will skip."""
    global _current, _skipping
    import torch

    output_dir = Path(config.hydra.runtime.output_dir)
    if is_finished_and_skipped(read_record(output_dir), config.resume, config.ckpt_path):
        _skipping = True
        return None
    sweep = config.sweep
    per_device = jobs_per_device(sweep.get("jobs_per_device", 1), OmegaConf.select(config, "hydra.sweep.dir"))
    pool = device_pool(config.trainer.accelerator, sweep.cpu_jobs, sweep.simulate_devices, per_device)
    lease_dir = Path(sweep.lease_dir) if sweep.lease_dir else default_lease_dir()
    lease = acquire(
        lease_dir,
        pool.names,
        on_wait=lambda: say(
            f"placement: all {len(pool)} {pool.kind} devices are leased ({lease_dir}); waiting for one"
        ),
    )
    parallel = parallel_jobs_of(int(config.hydra.launcher.n_jobs))
    # the jobs running side by side share the cores: without this each would start a thread per core
    threads = max(1, cpu_cores() // parallel)
    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)
    device = pool.device_of(lease.index)
    record = {
        "device": pool.devices[device],
        "index": device,
        "slot": pool.slot_of(lease.index),
        "jobs_per_device": pool.slots,
        "kind": pool.kind,
        "pool": list(pool.devices),
        "parallel_jobs": parallel,
        "torch_threads": threads,
        "pid": os.getpid(),
        "lease": str(lease.path),
        "acquired_at": lease.acquired_at,
        "released_at": None,
    }
    if pool.kind in ("cuda", "mps"):  # beside run.json's allocator peak, the check of the packing estimate
        try:
            record["footprint_estimate_bytes"] = job_footprint(config, pool.kind)[0].total
        except ValueError:  # a family the estimate does not cover (the LSTM)
            record["footprint_estimate_bytes"] = None
    _current = Placement(lease, pool.kind, device, threads, threads_before, placement_path(output_dir), record)
    _write(_current)
    slot = f", slot {pool.slot_of(lease.index) + 1} of {pool.slots}" if pool.slots > 1 else ""
    say(
        f"placement: {pool.devices[device]} ({pool.kind} device {device + 1} of {len(pool.devices)}{slot}), "
        f"{threads} torch thread(s), {parallel} job(s) at a time"
    )
    return _current


def release() -> None:
    """Release this process's lease (if any) and give torch its threads back."""
    global _current, _skipping
    _skipping = False
    if _current is None:
        return
    import torch

    placement, _current = _current, None
    placement.lease.release()
    torch.set_num_threads(placement.threads_before)
    placement.record["released_at"] = time.time()
    _write(placement)


def in_multirun() -> bool:
    """Whether this process runs a job of a multirun (``-m``)."""
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def current() -> Placement | None:
    return _current


def apply_placement(run: R) -> R:
    """Called by ``train()`` with the parsed run: the run with ``trainer.devices=[i]`` when this sweep job leased a
    slot of CUDA device i (``trainer.accelerator=mps`` for a slot of Apple's GPU), the run itself otherwise (no
    placement, or a CPU / simulated lease: those set threads, not the device).
    Fails the job when it asks for several devices inside a multirun, or when placement should have leased
    it a device and did not (then it could share a GPU)."""
    if not HydraConfig.initialized():
        return run  # called outside a Hydra job (tests, notebooks)
    hydra = HydraConfig.get()
    if placement_applies(hydra, run.trainer) and _current is None and not _skipping:
        raise RuntimeError(
            "automatic placement found no device lease for this job (see the DevicePlacement "
            "warning above); run with hydra/launcher=basic to train without placement"
        )
    refuse_multi_device_jobs_in_sweep(hydra.mode, run.trainer)
    if _current is None or _current.kind not in ("cuda", "mps"):
        return run
    if _current.kind == "cuda":
        pinned = {"devices": [_current.device]}
    else:  # Apple's GPU: one device, which every packed job of the sweep shares
        pinned = {"accelerator": "mps", "devices": 1}
    return replace(run, trainer={**run.trainer, **pinned})


def _write(placement: Placement) -> None:
    write_json_atomic(placement.record_path, placement.record)
