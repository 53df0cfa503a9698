"""The Lightning callbacks a run trains with, each built from the run's own settings.

Every callback takes its values here and reads the rest from the Trainer and the module in its hooks (the model's
FLOPs per token when training starts, a search trial when fitting starts), so this list is the one place a
setting reaches a callback.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lightning.pytorch.callbacks import ModelCheckpoint

from tinygpt.common.run_folder import KEPT_CHECKPOINT, checkpoints_dir
from tinygpt.train.diagnostics import CollapseDiagnostics
from tinygpt.train.last_checkpoint import LastCheckpoint
from tinygpt.train.logs import OptimizerStepAxis
from tinygpt.train.record import RunRecord
from tinygpt.train.sampling import TextSampler
from tinygpt.train.speed import SpeedMonitor

if TYPE_CHECKING:
    from tinygpt.data import Tokenizer
    from tinygpt.train.schema import RunConfig


def build_callbacks(run: RunConfig, run_dir: Path, tokenizer: Tokenizer, has_dev: bool, record: RunRecord) -> list:
    """The run's callbacks, the record last of those that write it; ``has_dev``: whether the data has a dev split
    (a run without one saves last.ckpt at its own steps, not after a validation)."""
    ckpt_dir = checkpoints_dir(run_dir)
    sample = run.sample
    callbacks = [
        # last.ckpt: the full training state, for resume; after the validation of a scoring step, at the end,
        # and on SIGINT/SIGTERM (tinygpt/train/last_checkpoint.py)
        LastCheckpoint(ckpt_dir, run.checkpoint.every_n_steps, run.trainer["val_check_interval"], has_dev),
        OptimizerStepAxis(),
        SpeedMonitor(
            peak_flops=run.speed.peak_flops,  # None: measured at the start of training
            precision=str(run.trainer["precision"]),
            on_peak=record.note_peak,
        ),
        TextSampler(tokenizer, sample.prompt, sample.max_new_tokens, sample.temperature, sample.top_k, run.seed),
        record,
    ]
    if run.diagnostics.collapse_steps:
        callbacks.append(CollapseDiagnostics(list(run.diagnostics.collapse_steps), record))
    if run.trial is not None:  # a search's trial: its dev scores go to the study, whose pruner may stop it
        # imported here: Optuna is loaded by a search's trials alone (launch/search_config.py says why)
        from tinygpt.train.pruning import TrialPruning

        callbacks.append(TrialPruning(run.name, run.trial))
    if run.checkpoint.keep_every_n_steps:
        # kept checkpoints at the scoring steps: weights only, for evaluate.py and generate.py. monitor="step"
        # keeps them all and gives this callback its own state key beside the last.ckpt one
        callbacks.append(
            ModelCheckpoint(
                dirpath=ckpt_dir,
                filename=KEPT_CHECKPOINT,
                auto_insert_metric_name=False,
                monitor="step",
                mode="max",
                save_top_k=-1,
                save_weights_only=True,
                every_n_train_steps=run.checkpoint.keep_every_n_steps,
            )
        )
    return callbacks
