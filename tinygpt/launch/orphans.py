"""Sweep workers die with their launcher: a watchdog thread that stops a worker whose parent process is gone.

The placement launcher (Hydra's joblib launcher, conf/hydra/launcher/placement.yaml) runs jobs in loky worker
processes, one per device (``sweep.cpu_jobs`` on a CPU, one per GPU). When the launcher dies without running
its shutdown (``kill -9``, an out-of-memory kill, a lost terminal session), nothing tells the workers: they were
re-parented and kept training, and a rerun of the sweep raced them for the same job folders.

Each worker therefore watches ``os.getppid()``: when its parent changes (the launcher died, the worker was
re-parented to init or a subreaper) it sends itself SIGTERM, which training turns into "save last.ckpt at the
end of this step, then stop" (tinygpt/train/callbacks/last_checkpoint.py), and if the worker is still alive
``grace_s`` seconds later (stuck in I/O, or between jobs with nothing to save) it exits hard.

Why polling rather than Linux's ``prctl(PR_SET_PDEATHSIG)``: the death signal is tied to the parent *thread*
that forked the worker, and loky starts replacement workers from its manager thread, so a worker could be
killed when a thread exits, not the launcher; it is also Linux-only. ``getppid`` works the same on Linux and
macOS (where there is no PDEATHSIG), costs one system call per ``poll_s``, and stops a worker within
``poll_s`` plus the end of its current step. The run-folder lock (tinygpt/train/runlock.py) covers the
remaining window: a rerun started before the worker has stopped skips that job and says so.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

from tinygpt.common.say import say

_watchdog: threading.Thread | None = None
_parent: int | None = None


def in_worker_process() -> bool:
    """Whether this process is a launcher's worker (loky names them LokyProcess-N); a job run in the process
    that launched it (hydra/launcher=basic, joblib with one job) is not watched: its parent is the shell."""
    return multiprocessing.current_process().name != "MainProcess"


def die_with_parent(grace_s: float = 60.0, poll_s: float = 0.5) -> bool:
    """Start this worker's watchdog (once per process); False when this is not a worker process."""
    global _watchdog, _parent
    if not in_worker_process():
        return False
    if _watchdog is None or not _watchdog.is_alive():
        _parent = os.getppid()
        _watchdog = threading.Thread(
            target=_watch, args=(_parent, grace_s, poll_s), name="tinygpt-parent-watchdog", daemon=True
        )
        _watchdog.start()
    return True


def exit_if_orphaned() -> None:
    """Called when a job ends (finished, failed or stopped by the watchdog's SIGTERM): a worker whose launcher
    is gone exits now instead of waiting for jobs that will never come."""
    if _parent is not None and os.getppid() != _parent:
        os._exit(1)


def _watch(parent: int, grace_s: float, poll_s: float) -> None:
    while os.getppid() == parent:
        time.sleep(poll_s)
    say(f"the sweep's launcher (pid {parent}) is gone; stopping this worker (pid {os.getpid()})", error=True)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s)
    os._exit(1)
