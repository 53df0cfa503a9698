"""Device leases: at most one holder per device, however jobs finish, fail or die.

A lease is an exclusive operating-system lock (``filelock.FileLock``: ``flock`` on Unix, ``msvcrt.locking`` on
Windows) on ``<lease dir>/<device name>.lock``, taken without blocking by trying each device in turn. The
operating system drops the lock when its file handle closes, which happens on ``release()`` and also when the
holding process ends in any way (an exception, ``kill -9``, an out-of-memory kill), so a crashed job can never
keep its device. Nothing is written into the lock files (their names are the state), so a stale file left
behind means nothing.

Why not ``job.num % K``: sweep jobs finish out of order, so job K+1 may start while job 1, the other user of
its device, is still running. Leases follow what is actually running. No torch import here: this module
must be cheap to import in any process.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import filelock

from tinygpt.common.errors import ConfigError


@dataclass
class Lease:
    """An exclusive hold on one device, index ``index`` of the pool it was taken from."""

    index: int
    name: str
    path: Path
    acquired_at: float = field(default_factory=time.time)
    _lock: filelock.BaseFileLock | None = field(default=None, repr=False)

    @property
    def held(self) -> bool:
        return self._lock is not None

    def release(self) -> None:
        if self._lock is not None:
            self._lock.release()  # closes the handle, which drops the lock
            self._lock = None


def try_lock(path: str | Path) -> filelock.BaseFileLock | None:
    """An exclusive lock on ``path`` (created if missing), without blocking: the held ``filelock.FileLock``, or
    None when another holder has it (another process, or another lock object in this one). ``release()`` (or the
    process ending in any way) drops it. The one lock primitive of tinygpt: device leases here, run folders in
    tinygpt/train/runlock.py, a search's study in tinygpt/launch/search.py."""
    lock = filelock.FileLock(path, timeout=0)
    try:
        lock.acquire()
    except filelock.Timeout:
        return None
    return lock


def try_acquire(lease_dir: str | Path, names: Sequence[str]) -> Lease | None:
    """The first free device of ``names`` (lowest index first), or None if every one is held."""
    lease_dir = Path(lease_dir)
    lease_dir.mkdir(parents=True, exist_ok=True)
    for index, name in enumerate(names):
        path = lease_dir / f"{name}.lock"
        lock = try_lock(path)
        if lock is not None:
            return Lease(index, name, path, _lock=lock)
    return None


def acquire(
    lease_dir: str | Path,
    names: Sequence[str],
    *,
    poll_s: float = 1.0,
    timeout_s: float | None = None,
    on_wait: Callable[[], None] | None = None,
) -> Lease:
    """A device lease, waiting while all are held (another sweep on this machine, or more parallel jobs than
    devices). ``on_wait`` is called once, when waiting starts. Raises TimeoutError after ``timeout_s``."""
    if not names:
        raise ConfigError("no devices to lease")
    started = time.monotonic()
    waited = False
    while True:
        lease = try_acquire(lease_dir, names)
        if lease is not None:
            return lease
        if not waited and on_wait is not None:
            on_wait()
        waited = True
        if timeout_s is not None and time.monotonic() - started > timeout_s:
            raise TimeoutError(f"no free device among {list(names)} in {lease_dir} after {timeout_s:.0f} s")
        time.sleep(poll_s)
