"""The Lightning callbacks a run trains with: the ones its config names (conf/callbacks/), built by Hydra, and the
ones the run itself needs.

Each configured callback takes its settings from the run's own keys (``checkpoint.every_n_steps``,
``sample.*``, ...: conf/callbacks/default.yaml interpolates them) and reads the rest from the Trainer, the data and
the module in its hooks (the checkpoint folder and the scoring steps, the tokenizer, the model's FLOPs per token,
the run record), so a config can add any Lightning callback beside them, or drop one, with Hydra's own syntax.
Every one is built before anything is written, so a bad value fails the run before its folder changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from hydra.errors import InstantiationException
from hydra.utils import instantiate
from lightning.pytorch.callbacks import Callback, ModelCheckpoint, ProgressBar

from tinygpt.common.errors import ConfigError
from tinygpt.common.run_folder import KEPT_CHECKPOINT, checkpoints_dir
from tinygpt.train.callbacks.last_checkpoint import LastCheckpoint

if TYPE_CHECKING:
    from tinygpt.train.schema import RunConfig


def build_callbacks(run: RunConfig, run_dir: Path) -> list[Callback]:
    """The configured callbacks (``callbacks.<name>``, in the config's order; a progress bar only where
    ``trainer.enable_progress_bar``) and the kept checkpoints at the scoring steps.
    The run record is added by ``train()``, which writes it."""
    callbacks = [configured(name, node) for name, node in (run.callbacks or {}).items() if node is not None]
    if not any(isinstance(c, LastCheckpoint) for c in callbacks):
        raise ConfigError(
            "callbacks: no tinygpt.train.callbacks.last_checkpoint.LastCheckpoint; a run resumes from its last.ckpt, "
            "so "
            "callbacks.last_checkpoint is required (checkpoint.every_n_steps sets how often it saves)"
        )
    if not run.trainer.get("enable_progress_bar", True):
        callbacks = [c for c in callbacks if not isinstance(c, ProgressBar)]
    if run.checkpoint.keep_every_n_steps:
        # kept checkpoints at the scoring steps: weights only, for evaluate.py and generate.py. monitor="step"
        # keeps them all and gives this callback its own state key beside the last.ckpt one
        callbacks.append(
            ModelCheckpoint(
                dirpath=checkpoints_dir(run_dir),
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


def configured(name: str, node: Mapping) -> Callback:
    """``callbacks.<name>`` built by Hydra; a failure (a bad value, a misspelt ``_target_``) in one line naming it."""
    if not isinstance(node, Mapping) or "_target_" not in node:
        raise ConfigError(f"callbacks.{name}: give a _target_ (a Lightning callback's class) and its arguments")
    try:
        callback = instantiate(node)
    except InstantiationException as err:
        cause = err.__cause__
        if isinstance(cause, ConfigError):  # the callback's own check, which names the run's key
            raise ConfigError(str(cause)) from None
        why = f"{type(cause).__name__}: {cause}" if cause is not None else str(err)
        raise ConfigError(f"callbacks.{name} ({node['_target_']}): {why.strip().splitlines()[0]}") from None
    if not isinstance(callback, Callback):
        raise ConfigError(f"callbacks.{name}: {node['_target_']} built a {type(callback).__name__}, not a Callback")
    return callback
