"""The OmegaConf resolvers of tinygpt's launcher configs, registered by one call.

``tinygpt.choices`` lists each config group's options for ``--help`` (conf/hydra/help/tinygpt.yaml),
``tinygpt.job_dir`` names a job's folder (conf/train.yaml's ``hydra.sweep.subdir``), ``tinygpt.parallel_jobs``
gives placement's ``n_jobs`` (conf/hydra/launcher/placement.yaml) and ``tinygpt.device_count`` the SLURM tasks
per run (conf/hydra/launcher/slurm.yaml). ``tinygpt.cli.config.register_configs`` calls ``register_resolvers``
with the schemas, so they exist in every entry point and inside launcher worker processes that import the task
function (``tinygpt.cli.train`` registers at import).
"""

from __future__ import annotations

import hashlib

from omegaconf import OmegaConf

from tinygpt.launch.devices import device_count, parallel_jobs
from tinygpt.launch.packing import jobs_per_device

MAX_NAME = 200  # file systems allow 255 bytes per path component


def job_dir_name(override_dirname: str) -> str:
    """A job's directory name from its overrides: deterministic (rerunning a command finds its jobs
    again, unlike timestamps), ``default`` when there are none, and flat (``model/position`` becomes
    ``model.position`` instead of a nested folder). Names too long for a file system keep their start
    and end a hash of the whole, so they stay unique and deterministic."""
    name = override_dirname.replace("/", ".") or "default"
    if len(name.encode()) > MAX_NAME:
        digest = hashlib.sha256(name.encode()).hexdigest()[:16]
        name = name.encode()[: MAX_NAME - 17].decode(errors="ignore") + "-" + digest
    return name


def placement_jobs(accelerator, cpu_jobs, simulate_devices, per_device, sweep_dir=None) -> int:
    """Placement's ``n_jobs``: one worker per lease of the pool; ``sweep.jobs_per_device=auto`` read from the plan
    the multirun made in its sweep folder (tinygpt/launch/packing.py)."""
    return parallel_jobs(accelerator, cpu_jobs, simulate_devices, jobs_per_device(per_device, sweep_dir))


NOT_CHOICES = ("schema", "lstm_schema")  # typed schemas stored in a group beside its options (cli/config.py)
NOT_GROUPS = ("hydra", "tools")  # Hydra's own groups; the other programs' configs


def config_choices() -> str:
    """``group: option, ...`` for every group a user composes from, as Hydra's --help lists them, without the
    schemas and the other programs' configs (read through the running Hydra's config loader)."""
    from hydra.core.global_hydra import GlobalHydra

    loader = GlobalHydra.instance().config_loader()
    lines: list[tuple[str, str]] = []

    def walk(parent: str) -> None:
        for group in sorted(loader.list_groups(parent)):
            path = f"{parent}/{group}" if parent else group
            if path.split("/")[0] in NOT_GROUPS:
                continue
            options = [o for o in loader.get_group_options(path) if o not in NOT_CHOICES]
            if options:
                lines.append((path, f"{path}: {', '.join(options)}"))
            walk(path)

    walk("")
    return "\n".join(line for _, line in sorted(lines))


RESOLVERS = {
    "tinygpt.choices": config_choices,
    "tinygpt.job_dir": job_dir_name,
    "tinygpt.parallel_jobs": placement_jobs,
    "tinygpt.device_count": device_count,
}


def register_resolvers() -> None:
    for name, function in RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, function)
