"""Sweep jobs on several devices: refused, unless a cluster starts their processes.

Lightning's ``strategy=ddp`` starts ranks 1..N-1 by running the script's command line again (adding Hydra's
run dir). For a single run that is sound; in a multirun the command line is the whole sweep, so every extra
rank would launch the sweep again (Lightning #11300). A sweep job may use several devices only when a cluster
starts one process per device itself: SLURM with one task per device, or torchrun. docs/sweeps.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from hydra.types import RunMode

from tinygpt.common.errors import ConfigError
from tinygpt.launch.devices import CUDA_ACCELERATORS, cuda_device_count, requested_devices


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
