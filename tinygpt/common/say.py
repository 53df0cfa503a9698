"""tinygpt's console lines: printed for the terminal and logged, so each job's log file holds them too.

Why both: a sweep's jobs run in other processes (or on other machines), and what they print reaches only the shell
that launched them; Hydra gives every job a log file (``<job folder>/train.log``) that holds what goes through
``logging``. So every line tinygpt shows is printed, exactly as it reads on the terminal, and logged through the
``tinygpt`` logger, which Hydra's job logging of tinygpt (conf/hydra/job_logging/tinygpt.yaml) writes to that
file only, with the time. Outside Hydra (the Python API, the tests) that logger has no handler of its own and the
lines are printed only.
"""

from __future__ import annotations

import logging
import sys

PREFIX = "[tinygpt] "
LOGGER = logging.getLogger("tinygpt")


def say(message: str = "", *, prefix: bool = True, error: bool = False) -> None:
    """Print ``[tinygpt] message`` (stderr for an error) and log ``message`` for the job's log file."""
    print((PREFIX if prefix else "") + message, file=sys.stderr if error else sys.stdout, flush=True)
    LOGGER.log(logging.ERROR if error else logging.INFO, message)
