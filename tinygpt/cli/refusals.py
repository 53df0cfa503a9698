"""One-line refusals: a scoring tool's refusal (score once, a bad argument) ends the program with one line.

evaluate, analyze and baselines raise AlreadyScored or ValueError (ConfigError included) before anything is
written; the user needs the reason, not a traceback, and a non-zero exit status for scripts that chain them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tinygpt.train.score_once import AlreadyScored


@contextmanager
def refused_in_one_line() -> Iterator[None]:
    try:
        yield
    except (AlreadyScored, ValueError) as refused:
        sys.exit(f"[tinygpt] refused: {refused}")
