"""One writer per run folder: an OS file lock on ``<run dir>/run.lock``, held for the whole run.

Two processes writing one folder (two terminals, a sweep rerun while an orphaned worker still trains, an
``evaluate.py split=test`` appending to a record that a training run is rewriting) interleave checkpoints, CSV
rows and TensorBoard events and corrupt the run's history. The lock is the same ``filelock.FileLock`` primitive
as the device leases (``tinygpt.launch.leases.try_lock``): the operating system drops it when the holder's file
handle closes, which also happens when the holder dies in any way (``kill -9`` included). So there is no
stale state to clean up: a lock file left by a dead process is simply taken by the next run; the PID written
into it is only there to name the holder in the refusal message (where the system lets a held file be written:
Windows locks its bytes, and the refusal then says "another process").

Readers (the sweep report, figures) take no lock: run.json and checkpoints are replaced atomically.
Under multi-process DDP only rank 0 takes it (the other ranks are the same run).
"""

from __future__ import annotations

import os
from pathlib import Path

import filelock

from tinygpt.common.run_folder import lock_path
from tinygpt.launch.leases import try_lock


class RunFolderBusy(RuntimeError):
    """Another live process holds the run folder's lock; nothing has been written."""

    def __init__(self, run_dir: Path, pid: int | None):
        self.run_dir, self.pid = Path(run_dir), pid
        holder = f"process {pid}" if pid else "another process"
        super().__init__(
            f"{run_dir} is being written by {holder} (lock {lock_path(run_dir)}); wait for it to "
            "finish or stop it: one run folder has one writer"
        )


def holder_pid(run_dir: str | Path) -> int | None:
    """The PID recorded by the last process that took the lock (alive or not), None if unknown."""
    try:
        return int(lock_path(run_dir).read_text().split()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return None


class RunLock:
    """The held lock of one run folder; ``release()`` (or the end of the process) frees it."""

    def __init__(self, run_dir: Path, lock: filelock.BaseFileLock):
        self.run_dir, self._lock = run_dir, lock

    @property
    def held(self) -> bool:
        return self._lock is not None

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def lock_run(run_dir: str | Path) -> RunLock:
    """Take the run folder's lock (creating the folder), or raise :class:`RunFolderBusy` naming the holder."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = try_lock(lock_path(run_dir))
    if lock is None:
        raise RunFolderBusy(run_dir, holder_pid(run_dir))
    try:  # the lock file's content names the holder; rewritten in place, so a reader sees the old or the new PID
        with open(lock_path(run_dir), "r+") as file:  # a second handle: closing it leaves the held lock in place
            file.truncate(0)
            file.write(f"{os.getpid()}\n")
    except OSError:
        pass  # the holder goes unnamed (a system that locks the file's bytes)
    return RunLock(run_dir, lock)
