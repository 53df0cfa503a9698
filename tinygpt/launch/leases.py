"""Device leases: at most one holder per device, however jobs finish, fail or die.

A lease is an exclusive ``fcntl.flock`` on ``<lease dir>/<device name>.lock``, taken without blocking by
trying each device in turn. The operating system drops the lock when its file descriptor closes, which
happens on ``release()`` and also when the holding process ends in any way (an exception, ``kill -9``, an
out-of-memory kill), so a crashed job can never keep its device. Nothing is written into the lock files
(their names are the state), so a stale file left behind means nothing.

Why not ``job.num % K``: sweep jobs finish out of order, so job K+1 may start while job 1, the other user of
its device, is still running. Leases follow what is actually running. No torch import here: this module
must be cheap to import in any process.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tinygpt.common.errors import ConfigError


@dataclass
class Lease:
    """An exclusive hold on one device, index ``index`` of the pool it was taken from."""

    index: int
    name: str
    path: Path
    acquired_at: float = field(default_factory=time.time)
    _fd: int | None = field(default=None, repr=False)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None


def try_lock(path: str | Path) -> int | None:
    """An exclusive ``flock`` on ``path`` (created if missing), without blocking: the open file descriptor
    that holds it, or None when another open file holds it. Closing the descriptor (or the process ending in
    any way) drops the lock. The one lock primitive of tinygpt: device leases here, run folders in
    tinygpt/train/runlock.py."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def try_acquire(lease_dir: str | Path, names: Sequence[str]) -> Lease | None:
    """The first free device of ``names`` (lowest index first), or None if every one is held."""
    lease_dir = Path(lease_dir)
    lease_dir.mkdir(parents=True, exist_ok=True)
    for index, name in enumerate(names):
        path = lease_dir / f"{name}.lock"
        fd = try_lock(path)
        if fd is not None:
            return Lease(index, name, path, _fd=fd)
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
