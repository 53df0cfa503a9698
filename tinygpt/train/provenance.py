"""What produced a run: tinygpt's version and commit, the libraries', Python's, the device, precision and MFU peak.

Written into run.json (``provenance``: one entry per training session, so a run resumed on another machine or
from other code says so, with the step each session started from) for the sweep report, which lists them per
run and warns when the runs of one table come from different code or devices: a gap between two variants
means little when one ran on another commit or another chip.

The commit is read with ``git`` from the checkout the package was imported from, when it is one (an installed
wheel has none: ``commit`` is then null); ``dirty`` is true when tracked files differ from that commit or
untracked, not ignored files lie beside them, since either may have changed what ran.
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from pathlib import Path

import torch

PACKAGES = ("tinygpt", "torch", "lightning", "hydra-core", "omegaconf", "transformers", "tokenizers")
# what tells two runs' code apart, and their hardware apart, for the report's warning
CODE_FIELDS = ("tinygpt", "commit", "dirty")
DEVICE_FIELDS = ("device",)
# the checkout this package is imported from, when it is one (an editable install or a clone on sys.path)
CHECKOUT = Path(__file__).resolve().parents[2]


def package_versions() -> dict[str, str | None]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_state(source: Path | None = None) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout holding ``source`` (default: this package's), or (None, None) outside one."""
    root = source if source is not None else CHECKOUT
    if not (root / ".git").exists():
        return None, None
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit or None, bool(status.strip())


def device_name(device: torch.device) -> str:
    """The chip a run computed on: the GPU's name, Apple's GPU, else the CPU's model (from /proc/cpuinfo on Linux)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "mps":
        return f"Apple GPU (mps), {platform.machine()}"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def collect(device: torch.device, precision: str, from_step: int = 0) -> dict:
    """One session's provenance; the MFU peak is added when the speed monitor has it (``matmul_peak_flops``)."""
    commit, dirty = git_state()
    versions = package_versions()
    return {
        "from_step": from_step,
        **{name: versions[name] for name in PACKAGES},
        "commit": commit,
        "dirty": dirty,
        "python": platform.python_version(),
        "device": device_name(torch.device(device)),
        "device_type": torch.device(device).type,
        "precision": precision,
        "matmul_peak_flops": None,
        "matmul_peak_source": None,
    }
