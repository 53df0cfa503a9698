"""A sweep's jobs: what the multirun command asked for, what is on disk, and how each run stands.

The jobs a sweep should have come from its ``multirun.yaml`` (Hydra saves the command's overrides there),
parsed by Hydra's public override parser and expanded as its basic sweeper does; the jobs it has are its
folders, each with the overrides Hydra saved in ``.hydra/overrides.yaml`` and the run record ``run.json``.
Matching the two marks the runs that never started. Only ``run.json`` and Hydra's own files are read:
never ``evaluations.jsonl``, so nothing here can see held-out scores.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from tinygpt.common.errors import PathError
from tinygpt.common.run_folder import RUN_RECORD
from tinygpt.common.run_folder import read_record as read_run_record
from tinygpt.common.sweep_jobs import expand_sweep
from tinygpt.launch.search_config import TRIAL_KEY, in_search, override_key

SEED_KEY = "seed"

# how a run stands: its run.json's status, or what its absence means
FINISHED, FAILED, UNFINISHED, NO_RECORD, MISSING = "finished", "failed", "unfinished", "no record", "missing"
PRUNED = "pruned"  # stopped early by its search's pruner: not a finished run, and never resumed


@dataclass
class Job:
    overrides: tuple[str, ...]  # the job's overrides (key=value), less those that do not name a job
    path: Path | None  # its folder; None when it never started
    record: dict | None  # its run.json

    @property
    def status(self) -> str:
        if self.path is None:
            return MISSING
        if self.record is None:
            return NO_RECORD  # the folder exists but training never started (a config error) or is starting
        status = self.record.get("status")
        # "running" in a record nobody is writing any more means the process died: the rerun resumes it
        return {"finished": FINISHED, "failed": FAILED, "pruned": PRUNED}.get(status, UNFINISHED)

    @property
    def seed(self) -> int | None:
        for override in self.overrides:
            if override_key(override) == SEED_KEY:
                return int(override.partition("=")[2])
        if self.record is not None:
            return self.record.get("config", {}).get(SEED_KEY)
        return None

    @property
    def variant(self) -> tuple[str, ...]:
        """The overrides minus the seed: the runs of one variant differ only by seed."""
        return tuple(o for o in self.overrides if override_key(o) != SEED_KEY)

    @property
    def name(self) -> str:
        return self.path.name if self.path is not None else ",".join(self.overrides)


def identity(overrides, excluded: set[str]) -> tuple[str, ...]:
    """The overrides that tell one job from another: without those the sweep excludes from job folder names
    (hydra.job.config.override_dirname.exclude_keys: resume, trainer.devices, sweep.*, ...)."""
    return tuple(o for o in overrides if override_key(o) not in excluded)


def sweep_command(sweep_dir: Path) -> tuple[list[tuple[str, ...]], set[str]]:
    """From the sweep's multirun.yaml: every job's overrides that its command asked for, in launch order, and
    the keys excluded from job folder names. ([], {}) without one."""
    path = sweep_dir / "multirun.yaml"
    if not path.exists():
        return [], set()
    hydra = OmegaConf.load(path).hydra
    excluded = set(OmegaConf.select(hydra, "job.config.override_dirname.exclude_keys") or [])
    if in_search(hydra):
        # a search's jobs are what its study sampled: its trial folders, not a product of values; and a trial is
        # known by its number, since a sampler may draw the same values twice (two runs, not one)
        return [], excluded - {TRIAL_KEY}
    arguments = [f"{key}={value}" for key, value in (OmegaConf.select(hydra, "sweeper.params") or {}).items()]
    arguments += list(hydra.overrides.task)
    return expand_sweep(OverridesParser.create().parse_overrides(arguments)), excluded


def saved_overrides(folder: Path) -> tuple[str, ...]:
    return tuple(str(line) for line in OmegaConf.load(folder / ".hydra" / "overrides.yaml"))


def read_record(folder: Path) -> dict | None:
    """The run's record, or None when it has none; a damaged one (records are written atomically, so only a
    foreign file gets here) counts as none rather than stopping the report."""
    try:
        return read_run_record(folder)
    except json.JSONDecodeError:
        return None


def load_sweep(sweep_dir: str | Path) -> list[Job]:
    """The sweep's jobs: those its command asked for, in launch order, then any other job folder in it (an
    earlier command with the same sweep name). A job is known by its overrides, less the excluded keys, so
    rerunning with e.g. sweep.cpu_jobs=2 still finds the same jobs. A single run's folder (its run.json, no
    multirun.yaml) is a sweep of that one job."""
    sweep_dir = Path(sweep_dir)
    if not sweep_dir.is_dir():
        raise PathError(f"no sweep folder {sweep_dir}")
    if (sweep_dir / RUN_RECORD).is_file() and not (sweep_dir / "multirun.yaml").exists():
        overrides = saved_overrides(sweep_dir) if (sweep_dir / ".hydra" / "overrides.yaml").exists() else ()
        return [Job(identity(overrides, set()), sweep_dir, read_record(sweep_dir))]
    expected, excluded = sweep_command(sweep_dir)
    folders = {
        frozenset(identity(saved_overrides(f.parent.parent), excluded)): f.parent.parent
        for f in sorted(sweep_dir.glob("*/.hydra/overrides.yaml"))
    }
    jobs = []
    for overrides in expected:
        overrides = identity(overrides, excluded)
        folder = folders.pop(frozenset(overrides), None)
        jobs.append(Job(overrides, folder, read_record(folder) if folder else None))
    for folder in sorted(folders.values()):
        jobs.append(Job(identity(saved_overrides(folder), excluded), folder, read_record(folder)))
    return jobs
