"""A run's loggers: built from its settings, its switches as hparams, one CSV and one TensorBoard history per run
that continue across resume without duplicates or gaps.

A run resumed from a checkpoint at optimizer step S repeats nothing up to S and everything after it, so
what the loggers hold past S (written before the crash, after the checkpoint) must go:

- TensorBoard: the resumed session's ``SummaryWriter`` gets ``purge_step=S + 1``, TensorBoard's own
  mechanism for this: it writes a session-start marker, and readers (TensorBoard, ``EventAccumulator``) drop
  the earlier events at steps >= S + 1. The new event file lands in the same version folder (``version: ""``).
- CSV: :class:`ResumableCSVLogger` keeps the rows at steps <= S and appends. (Lightning's ``CSVLogger``
  deletes an existing ``metrics.csv`` when its writer starts: a resumed run kept only the rows after S.)

Both need the steps to mean the same thing for every metric, so ``OptimizerStepAxis``
(tinygpt/train/callbacks/step_axis.py) files the training metrics at the optimizer step count (1, 2, ...; the dev
scores already are), not Lightning's 0-based batch index: then "at or before the checkpoint" is "step <= S" for
every row.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import TYPE_CHECKING

from hydra.utils import get_class, instantiate
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only

from tinygpt.common.files import atomic_write
from tinygpt.common.run_folder import CSV_METRICS
from tinygpt.train.trackers import remember, tracker_kwargs, tracker_of_target

if TYPE_CHECKING:
    from tinygpt.model import GPTConfig, LSTMConfig
    from tinygpt.train.schema import RunConfig


class ResumableCSVLogger(CSVLogger):
    """Lightning's CSVLogger that continues ``metrics.csv``: rows at steps <= ``resume_step`` are kept (the
    history up to the checkpoint the run resumes from), later ones dropped, and new rows appended under the
    union of the old and new columns. ``resume_step=0``: a fresh start, any earlier rows are dropped."""

    def __init__(self, *args, resume_step: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.resume_step = resume_step
        if rank_zero_only.rank == 0:
            self._continue(Path(self.log_dir) / CSV_METRICS)

    def _continue(self, path: Path) -> None:
        if not path.exists():
            return
        with open(path, newline="") as file:
            reader = csv.DictReader(file)
            columns = list(reader.fieldnames or [])
            rows = [
                row
                for row in reader
                if row.get("step") not in (None, "") and int(float(row["step"])) <= self.resume_step
            ]
        experiment = self.experiment  # Lightning's writer deletes an existing metrics.csv when it is created
        with atomic_write(path, newline="") as file:
            writer = csv.DictWriter(file, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
        experiment.metrics_keys = columns  # the writer extends this header instead of starting a new one


def resume_kwargs(target: str, resume_step: int) -> dict:
    """Extra constructor arguments for a logger class (its Hydra ``_target_``) in a run continuing at
    ``resume_step`` (0: from scratch)."""
    cls = get_class(target)
    if issubclass(cls, TensorBoardLogger):
        return {"purge_step": resume_step + 1}
    if issubclass(cls, ResumableCSVLogger):
        return {"resume_step": resume_step}
    return {}


def flush(loggers) -> None:
    """Everything logged so far onto disk (called before each checkpoint, so a kill leaves no gap before it)."""
    for logger in loggers:
        logger.save()
        experiment = logger.experiment if rank_zero_only.rank == 0 else None
        if hasattr(experiment, "flush"):
            experiment.flush()


def build_loggers(
    run: RunConfig, run_dir: Path, resume_step: int, model: GPTConfig | LSTMConfig, config: dict | None = None
) -> list:
    """The run's loggers (``logger.*``, Hydra instantiate targets), continuing from ``resume_step``, with the run's
    switches in their hparams (TensorBoard's hparams tab pairs them with the best dev score; a resumed session's
    TensorBoard already has them). A tracker (wandb, MLflow: tinygpt/train/trackers.py) gets the resolved
    ``config`` (run.json's) as its parameters, and the run folder remembers its tracker run."""
    loggers = []
    for logger in run.logger.values():
        tracker = tracker_of_target(logger["_target_"])
        if tracker is None:
            kwargs = {"save_dir": str(run_dir), **resume_kwargs(logger["_target_"], resume_step)}
        else:
            kwargs = tracker_kwargs(tracker, dict(logger), run_dir, resume_step, run.name)
        loggers.append(instantiate(logger, **kwargs))
    switches = {
        **{f"model/{k}": ("null" if v is None else v) for k, v in vars(model).items()},
        **{f"optim/{k}": str(v) if isinstance(v, list) else v for k, v in vars(run.optim).items()},
        "data/name": run.data.name,
        "data/tokenizer": run.data.tokenizer.name,
        "data/fraction": str(run.data.fraction),
        "seed": run.seed,
        "max_steps": run.trainer["max_steps"],
    }
    for logger, node in zip(loggers, run.logger.values(), strict=True):
        if isinstance(logger, TensorBoardLogger) and resume_step:
            continue  # logged by the session that started the run (a second copy would repeat its step-0 metric)
        if isinstance(logger, TensorBoardLogger):
            logger.log_hyperparams(switches, metrics={"hp/best_dev_bpb": math.nan})
        elif (tracker := tracker_of_target(node["_target_"])) is not None:
            if tracker == "mlflow" and resume_step:
                continue  # MLflow's parameters cannot change: the session that started the run logged them
            logger.log_hyperparams(config if config is not None else switches)
        else:
            logger.log_hyperparams(switches)
    remember(run_dir, loggers)
    return loggers
