"""``last.ckpt``, the full training state for resume: saved where it is complete, and when the run is stopped.

Lightning's ``ModelCheckpoint(every_n_train_steps=N, save_last=True)`` saves in ``on_train_batch_end``, which
comes before the validation of that step: a last.ckpt at a scoring step held a stale best score, and a crash
during that validation lost the dev point for good (the resume starts after it). It also saves nothing at the
end of training when ``max_steps`` is not a multiple of N, and nothing on Ctrl-C. This callback saves
last.ckpt (through the trainer, so through the run's atomic CheckpointIO):

- every ``every_n_steps`` optimizer steps, and at every scoring step *after* its validation (in
  ``on_validation_end``, a save point Lightning's loops resume from without validating again);
- at the end of training, if the last step was not saved yet (after the final validation, which ``train()``
  runs when the last step was not a scoring step);
- on SIGINT (Ctrl-C) and SIGTERM (a scheduler's preemption, ``kill``, a sweep worker whose launcher died): the
  handler only sets a flag; the save happens at the next point where the state is whole (the end of the
  current step, after its validation if it has one), and :class:`TrainingInterrupted` stops the run once that
  step's metrics are logged (at the start of the next step, which then never runs). Saving from inside the
  handler could catch a step half done: weights updated, counters not, dropout's RNG moved. A second signal
  stops at once.

The loggers are flushed before each save, and again once the saved step's training metrics are logged
(Lightning logs them after ``on_train_batch_end``), so the CSV / TensorBoard history up to a checkpoint is on
disk. What a ``kill -9`` can still lose is the saved step's own training row, and only if it lands in the few
milliseconds between that checkpoint's save and the next step's start (the window holds the next batch's fetch;
no training or validation runs in it); a checkpoint at a scoring step has no such window.
It subclasses Lightning's ``Checkpoint``, so the Trainer runs it after the
other callbacks (the run record and the sample are written before the state is saved).
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

from lightning.pytorch.callbacks import Checkpoint

from tinygpt.common.errors import ConfigError
from tinygpt.common.run_folder import LAST_CHECKPOINT, checkpoints_dir
from tinygpt.common.say import say
from tinygpt.train.logs import flush

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingInterrupted(Exception):
    """Training stopped on a signal after saving last.ckpt; rerunning the same command resumes from it."""

    def __init__(self, signum: int, step: int, path: Path):
        self.signum, self.step = signum, step
        super().__init__(
            f"{signal.Signals(signum).name}: stopped after step {step}; saved {path}. "
            "Rerun the same command to continue"
        )


class LastCheckpoint(Checkpoint):
    def __init__(self, every_n_steps: int):
        """every_n_steps: ``checkpoint.every_n_steps``. The folder (the run's ``checkpoints/``), the scoring steps
        and whether there is a dev split to score are the Trainer's and the data's, read in ``setup``."""
        if not isinstance(every_n_steps, int) or every_n_steps < 1:
            raise ConfigError(f"LastCheckpoint(every_n_steps={every_n_steps!r}): must be a positive integer")
        self.every_n_steps = every_n_steps
        self.path: Path | None = None
        self.val_check_interval, self.has_dev = 1, False
        self.saved_step = -1
        self.stop_signal: int | None = None
        self._previous: dict[int, object] = {}

    def setup(self, trainer, pl_module, stage):
        self.path = checkpoints_dir(trainer.default_root_dir) / LAST_CHECKPOINT
        self.val_check_interval = trainer.val_check_interval
        # a run without a dev split saves at its own steps, not after a validation
        self.has_dev = bool(getattr(trainer.datamodule, "has_dev", False))

    # -- when to save --------------------------------------------------------------------------------------
    def _scoring_step(self, step: int) -> bool:
        return self.has_dev and step % self.val_check_interval == 0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        if self._scoring_step(step):
            return  # saved after this step's validation
        if step % self.every_n_steps == 0 or self.stop_signal is not None:
            self.save(trainer)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        # Lightning hands this step's training metrics to the loggers after on_train_batch_end, i.e. after the
        # save above: flush them now, and stop here (not in on_train_batch_end) so they are not lost
        if self.saved_step == trainer.global_step:
            flush(trainer.loggers)
        self._stop_if_asked(trainer)

    def on_validation_end(self, trainer, pl_module):
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        self.save(trainer)  # this step's training metrics were logged before its validation
        self._stop_if_asked(trainer)

    def on_train_end(self, trainer, pl_module):
        # with a dev split, a last step that was not a scoring step is scored by train() right after fit, which
        # then saves: saving here, before that score, would let a crash during it leave a last.ckpt whose
        # score is missing from the logs, and the resumed run would log it a second time
        if self.saved_step != trainer.global_step and not self.has_dev:
            self.save(trainer)
        self._restore_handlers()

    def save(self, trainer) -> None:
        flush(trainer.loggers)
        # the full state (optimizer, loops, callbacks) that exact resume needs; saying so keeps Lightning from
        # logging after every save that it "defaulted" to it
        trainer.save_checkpoint(self.path, weights_only=False)
        self.saved_step = trainer.global_step

    # -- signals -------------------------------------------------------------------------------------------
    def on_train_start(self, trainer, pl_module):
        self.saved_step = trainer.global_step  # a resumed run's checkpoint is already on disk
        if threading.current_thread() is threading.main_thread():  # handlers can only be set there
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._on_signal)

    def _on_signal(self, signum, frame) -> None:
        if self.stop_signal is not None:  # the second one: stop now, as without this callback
            self._restore_handlers()
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            raise SystemExit(128 + signum)
        self.stop_signal = signum
        say("", prefix=False)
        say(
            f"{signal.Signals(signum).name}: saving {self.path} at the end of this step, then "
            "stopping (send it again to stop at once)"
        )

    def _stop_if_asked(self, trainer) -> None:
        if self.stop_signal is not None:
            if self.saved_step != trainer.global_step:  # a signal during the validation of an unsaved step
                self.save(trainer)
            flush(trainer.loggers)
            raise TrainingInterrupted(self.stop_signal, trainer.global_step, self.path)

    def _restore_handlers(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def on_exception(self, trainer, pl_module, exception):
        self._restore_handlers()
