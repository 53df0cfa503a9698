"""The progress callbacks: a bar on a terminal, one line every N steps elsewhere.

Why lines: tqdm redraws its bar with carriage returns, and in a log file or a SLURM job's output every redraw
becomes a line of its own (one or more per step). When stdout or stderr is not a terminal, `progress.style=auto`
picks LineProgress instead, a Lightning ProgressBar callback that prints one line every `progress.every_n_steps`
optimizer steps (and at the last step) plus one line per validation (and, for a validation that passes a few
seconds, how far it is: tinygpt/common/progress.py). The choice is made when the Trainer is
built, from the config: `progress.style=bar|lines` forces one; `trainer.enable_progress_bar=false` prints none.
Under the bar the same step and dev lines still go to the run's train.log (BarProgress), so a run's log reads the
same whether it was watched in a terminal or not.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

from lightning.pytorch.callbacks import ProgressBar, TQDMProgressBar

from tinygpt.common.errors import ConfigError
from tinygpt.common.progress import Progress
from tinygpt.common.say import LOGGER_NAME, say

SHORT_NAMES = {"train/loss": "loss", "train/tokens_per_sec": "tokens/s", "dev/bpb": "dev bpb"}


class LineProgress(ProgressBar):
    """One line every `every_n_steps` optimizer steps and at the last one, and one per validation, on stdout (and
    the run's train.log); ``emit``: where each line goes (``say``)."""

    def __init__(self, every_n_steps: int = 10, emit: Callable[[str], None] = say):
        super().__init__()
        self.every_n_steps = every_n_steps
        self.emit = emit
        self._enabled = True
        self._last_printed = -1
        self._started = time.monotonic()

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def on_train_start(self, trainer, pl_module) -> None:
        self._started = time.monotonic()
        self._last_printed = trainer.global_step  # a resumed run does not repeat its last line

    def _metrics(self, trainer, pl_module, keys) -> str:
        values = self.get_metrics(trainer, pl_module)
        parts = []
        for key in keys:
            value = values.get(key)
            if isinstance(value, (int, float)):
                parts.append(
                    f"{SHORT_NAMES.get(key, key)} {value:,.0f}"
                    if key == "train/tokens_per_sec"
                    else f"{SHORT_NAMES.get(key, key)} {value:.4f}"
                )
        return "  ".join(parts)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        due = step % self.every_n_steps == 0 or step == trainer.max_steps
        if not self._enabled or not due or step == self._last_printed:
            return
        self._last_printed = step
        elapsed = time.monotonic() - self._started
        metrics = self._metrics(trainer, pl_module, ("train/loss", "train/tokens_per_sec"))
        self.emit(f"step {step}/{trainer.max_steps}  {metrics}  ({elapsed:.0f} s)")

    def on_validation_start(self, trainer, pl_module) -> None:
        total = sum(trainer.num_val_batches) if trainer.num_val_batches else None
        self._validation = Progress(f"step {trainer.global_step}/{trainer.max_steps}  scoring dev", total)

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        if self._enabled and not trainer.sanity_checking:
            self._validation.update(batch_idx + 1)

    def on_validation_end(self, trainer, pl_module) -> None:
        if self._enabled and not trainer.sanity_checking:
            dev = self._metrics(trainer, pl_module, ("dev/bpb",))
            self.emit(f"step {trainer.global_step}/{trainer.max_steps}  {dev}")


class BarProgress(TQDMProgressBar):
    """tqdm's bar on the terminal, and LineProgress's step and dev lines in the run's train.log only: a run watched
    in a terminal keeps the same log as one run in the background."""

    def __init__(self, every_n_steps: int = 10):
        super().__init__()
        self.lines = LineProgress(every_n_steps, emit=logging.getLogger(LOGGER_NAME).info)

    def on_train_start(self, trainer, pl_module) -> None:
        super().on_train_start(trainer, pl_module)
        self.lines.on_train_start(trainer, pl_module)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        super().on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)
        self.lines.on_train_batch_end(trainer, pl_module, outputs, batch, batch_idx)

    def on_validation_end(self, trainer, pl_module) -> None:
        super().on_validation_end(trainer, pl_module)
        self.lines.on_validation_end(trainer, pl_module)


def _bar(every_n_steps: int) -> ProgressBar:
    return BarProgress(every_n_steps)


PROGRESS = {"bar": _bar, "lines": LineProgress}  # progress.style -> the ProgressBar callback; plus "auto"


def is_terminal() -> bool:
    # tqdm draws on stderr and our lines go to stdout: a bar only when both are a terminal
    return sys.stdout.isatty() and sys.stderr.isatty()


def progress_callback(style: str, every_n_steps: int) -> ProgressBar:
    """The progress callback that `progress.style` asks for; auto: a bar on a terminal, lines otherwise."""
    if style != "auto" and style not in PROGRESS:
        raise ConfigError(f"progress.style={style!r} is not allowed: must be one of auto, " + ", ".join(PROGRESS))
    if not isinstance(every_n_steps, int) or every_n_steps < 1:
        raise ConfigError(f"progress.every_n_steps={every_n_steps!r} is not allowed: must be a positive integer")
    if style == "auto":
        style = "bar" if is_terminal() else "lines"
    return PROGRESS[style](every_n_steps)
