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
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PREFIX = "[tinygpt] "
LOGGER_NAME = "tinygpt"  # the logger a run's train.log holds (conf/hydra/job_logging/tinygpt.yaml)
LOGGER = logging.getLogger(LOGGER_NAME)
EXIT_USER_ERROR = 2  # every program's status for a refused input (tinygpt/cli/entry.py)


def say(message: str = "", *, prefix: bool = True, error: bool = False) -> None:
    """Print ``[tinygpt] message`` (stderr for an error) and log ``message`` for the job's log file."""
    print((PREFIX if prefix else "") + message, file=sys.stderr if error else sys.stdout, flush=True)
    LOGGER.log(logging.ERROR if error else logging.INFO, message)


# set by every program's entry (tinygpt/cli/entry.py) while it runs, when the user asked for Hydra's full errors
# (HYDRA_FULL_ERROR=1, which the entry itself always sets so that Hydra hands its errors on)
FULL_ERRORS_ENV = "TINYGPT_FULL_ERRORS"


def full_errors() -> bool:
    """Whether the user asked for every error's traceback (HYDRA_FULL_ERROR=1): then a known error is raised as it
    is, not turned into one line."""
    return os.environ.get(FULL_ERRORS_ENV) == "1"


class OneLine(SystemExit):
    """Ends the program with exit status ``code`` after its one line was printed; ``str()`` is the line."""

    def __init__(self, line: str, code: int = EXIT_USER_ERROR):
        super().__init__(code)
        self.line = line

    def __str__(self) -> str:
        return self.line


def fail(message: str, verb: str = "error", code: int = EXIT_USER_ERROR) -> OneLine:
    """Print ``[tinygpt] <verb>: message`` on one line of stderr, and into the run's log file when there is one (a
    logger without handlers would hand an error to Python's last-resort handler, a second line); return the exit
    to raise."""
    line = f"{verb}: {' '.join(message.split())}"
    print(PREFIX + line, file=sys.stderr, flush=True)
    if LOGGER.handlers:
        LOGGER.error(line)
    return OneLine(PREFIX + line, code)


# the loggers a run's log file holds: tinygpt's lines and Lightning's (which do not propagate to the root)
RUN_LOGGERS = ("tinygpt", "lightning.pytorch", "lightning.fabric")


@contextmanager
def log_file(path: str | Path) -> Iterator[None]:
    """Outside Hydra (the Python API), what Hydra's job logging does for a program: the run's lines, tinygpt's and
    Lightning's, also go to ``path`` with the time. The file is made at the first line, so a run refused before
    it writes anything leaves none."""
    handler = logging.FileHandler(path, delay=True)
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(name)s][%(levelname)s] - %(message)s"))
    loggers = [logging.getLogger(name) for name in RUN_LOGGERS]
    # a Hydra program run earlier in this process may have disabled them and every logger below them (a tool's
    # job_logging=disabled sets disable_existing_loggers: Lightning's rank_zero logger, say), which would leave
    # this run's log without their lines
    below = [
        logger
        for name, logger in list(logging.root.manager.loggerDict.items())
        if isinstance(logger, logging.Logger) and any(name.startswith(run + ".") for run in RUN_LOGGERS)
    ]
    before = [(logger.level, logger.disabled) for logger in loggers]
    disabled_below = [logger for logger in below if logger.disabled]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(min(logger.level or logging.INFO, logging.INFO))
        logger.disabled = False
    for logger in disabled_below:
        logger.disabled = False
    try:
        yield
    finally:
        for logger, (level, disabled) in zip(loggers, before, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.disabled = disabled
        for logger in disabled_below:
            logger.disabled = True
        handler.close()
