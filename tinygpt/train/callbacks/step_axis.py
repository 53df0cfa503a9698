"""The loggers' x axis for training metrics: the optimizer step count (1, 2, ...), as the dev scores have it.

Lightning files the metrics logged in a training batch at its 0-based batch index; a resumed run's histories are
cut at "step <= the checkpoint's step" (tinygpt/train/logs.py), which needs every metric on the same axis.
"""

from __future__ import annotations

import lightning as L


class OptimizerStepAxis(L.Callback):
    """Logs ``step`` = optimizer steps done, which Lightning's logger connector uses as the x value of the
    training metrics logged in the same batch (instead of its 0-based batch counter)."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        pl_module.log("step", float(trainer.global_step), on_step=True, on_epoch=False)
