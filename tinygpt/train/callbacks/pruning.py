"""Stop a search's hopeless trial early: report each dev score to its Optuna trial, stop when the pruner says so.

A search's trial (``trial=N``, set by its sweeper: tinygpt/launch/search.py) reports the dev bits per byte of
every scoring step to its study, at the optimizer step it was scored, and asks the study's pruner (e.g. Optuna's
``MedianPruner``: worse than the median of earlier trials at the same step, after a warm-up) whether to go on.
When pruned, the Trainer stops at that step and the run finishes with ``status: pruned`` and the step and score
in run.json; the sweeper reads that and tells the study, and the job's device and threads go to the next trial.

Why not optuna-integration's ``PyTorchLightningPruningCallback``: it reports at ``current_epoch``, and tinygpt
trains by steps in one endless epoch (``max_epochs=-1``, validation every ``val_check_interval`` steps), so every
report would land on step 0; it also refuses SQLite-less storages under DDP. This callback is the same few calls
(``trial.report``, ``trial.should_prune``) at the optimizer step.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import lightning as L

if TYPE_CHECKING:
    import optuna


class TrialPruning(L.Callback):
    def __init__(self, name: str, number: int | None, monitor: str = "dev/bpb") -> None:
        """name, number: the run's ``name`` (its study's) and ``trial``; the trial is opened in the study its
        sweeper runs when fitting starts (tinygpt/launch/study.py). A run that is no search's trial
        (``trial=null``, every run but a search's) has nothing to report: the callback does nothing, and Optuna
        is not imported."""
        self.name, self.number = name, number
        self.trial: optuna.trial.Trial | None = None
        self.monitor = monitor
        self.pruned: dict | None = None  # {"step", "dev_bits_per_byte"} once the pruner stopped the run

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self.trial is None and self.number is not None:
            from hydra.core.hydra_config import HydraConfig

            from tinygpt.launch.study import job_trial  # Optuna, loaded by a search's trials alone

            self.trial = job_trial(HydraConfig.get(), self.name, self.number)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.trial is None or trainer.sanity_checking or self.monitor not in trainer.callback_metrics:
            return
        value, step = float(trainer.callback_metrics[self.monitor]), trainer.global_step
        if not math.isfinite(value):  # a diverged run: no score to compare, and no reason to go on
            self.pruned = {"step": step, "dev_bits_per_byte": value}
            trainer.should_stop = True
            return
        self.trial.report(value, step)
        # at the last step the trial is done: its score stands, whatever the pruner would say
        if step < trainer.max_steps and self.trial.should_prune():
            self.pruned = {"step": step, "dev_bits_per_byte": value}
            trainer.should_stop = True
