"""A long scoring or encoding says how far it is: one line once it passes a few seconds, then one every few more.

Why: scoring a large dev or held-out split (sliding windows, every token once) can take minutes, and a program
that prints nothing meanwhile looks hung. Short scorings, the usual case, stay silent. Used by the standalone
scoring (tinygpt/metrics/scoring.py: evaluate, analyze, a run's final score) and by the training progress lines'
validations (tinygpt/train/callbacks/progress.py), and by the encoding of a corpus's train split
(tinygpt/data/datamodule.py).
The clock is an argument so that tests need not wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tinygpt.common.say import say

FIRST_AFTER_S = 5.0  # silent below this
EVERY_S = 10.0  # then a line at most this often


class Progress:
    def __init__(
        self,
        what: str,
        total: int | None,
        first_after: float = FIRST_AFTER_S,
        every: float = EVERY_S,
        clock: Callable[[], float] | None = None,
        unit: str = "batches",
        rate: bool = False,
    ):
        """unit: what ``done`` counts; rate: also say how many millions of them a second (an encoding's speed)."""
        self.what, self.total, self.first_after, self.every, self.unit = what, total, first_after, every, unit
        self.rate = rate
        self.clock = clock or time.monotonic
        self.started = self.clock()
        self.next_at = self.started + first_after

    def update(self, done: int, detail: str | None = None) -> str | None:
        """After ``done`` batches (or ``unit``): the line printed now, or None. detail: said after the share done
        (an encoding's "document 3 of 12")."""
        now = self.clock()
        if now < self.next_at or (self.total is not None and done >= self.total):
            return None
        self.next_at = now + self.every
        elapsed = now - self.started
        if self.total:
            left = elapsed / done * (self.total - done) if done else float("nan")
            line = f"{self.what}: {done:,}/{self.total:,} {self.unit} ({done / self.total:.0%}), "
            line += f"{detail}, " if detail else ""
            line += f"{elapsed:.0f} s, about {left:.0f} s left"
        else:
            line = f"{self.what}: {done:,} {self.unit}, " + (f"{detail}, " if detail else "") + f"{elapsed:.0f} s"
        if self.rate and elapsed > 0:
            line += f" ({done / elapsed / 1e6:,.1f} M {self.unit}/s)"
        say(line)
        return line
