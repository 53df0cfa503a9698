"""OmegaConf resolvers that tinygpt's Hydra config uses. Registered on import of ``tinygpt.train``, so
also inside launcher worker processes that import the task function."""

from __future__ import annotations

import hashlib

from omegaconf import OmegaConf

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


def register() -> None:
    if not OmegaConf.has_resolver("tinygpt.job_dir"):
        OmegaConf.register_new_resolver("tinygpt.job_dir", job_dir_name)
