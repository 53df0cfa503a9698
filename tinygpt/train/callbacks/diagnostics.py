"""003's collapse diagnostics as a training callback: ``diagnostics.collapse_steps=[1,400]``.

At each listed step it records the train loss (bits) and the gradient norm at every layer's attention weights,
measured before clipping; at the end of training, the total variation distance between the predictions for two
different contexts (the first two windows of the last training batch) and the unigram entropy of the training
text, the score of a model that ignores its input. Everything goes to the run record (``run.json``,
key ``diagnostics``) and to the loggers (``diagnostics/...``).
"""

from __future__ import annotations

import lightning as L
import torch

from tinygpt.common.errors import ConfigError
from tinygpt.metrics import unigram_entropy_bits
from tinygpt.train.callbacks.collapse import attention_grad_norms, prediction_tvd
from tinygpt.train.record import RunRecord, read_record, run_record


class CollapseDiagnostics(L.Callback):
    def __init__(self, steps: list[int]):
        """steps: ``diagnostics.collapse_steps``; none (the default): the callback measures nothing."""
        if any(int(s) < 1 for s in steps):
            raise ConfigError(f"diagnostics.collapse_steps={list(steps)}: give training steps >= 1 (1 = the first)")
        self.steps = sorted({int(s) for s in steps})
        self.record: RunRecord | None = None
        self.diagnostics: dict = {"steps": {}}
        self._last_batch: torch.Tensor | None = None

    def on_fit_start(self, trainer, pl_module):
        if not self.steps:
            return
        self.record = run_record(trainer)
        if self.record is not None:  # a resumed run keeps what it measured before
            previous = read_record(self.record.run_dir) or {}
            self.diagnostics = {"steps": {}, **(previous.get("diagnostics") or {})}
        train_ids = trainer.datamodule.train_split.ids
        self._update(unigram_entropy_bits=unigram_entropy_bits(train_ids))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if not self.steps:
            return
        self._last_batch = batch[0]

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        if not self.steps:
            return
        # Lightning calls this after backward and before gradient clipping, so these are the raw gradients
        step = trainer.global_step + 1
        if step in self.steps:
            norms = attention_grad_norms(pl_module.model)
            self.diagnostics["steps"][str(step)] = {"attention_grad_norms": norms}
            for logger in trainer.loggers:
                logger.log_metrics(
                    {f"diagnostics/attention_grad_norm/layer_{i}": n for i, n in enumerate(norms, start=1)}, step=step
                )

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if not self.steps:
            return
        step = trainer.global_step  # already counts this batch's optimizer step
        point = self.diagnostics["steps"].get(str(step))
        if point is not None and "train_loss_bits" not in point:
            # what GPTModule.training_step just logged: the cross-entropy in bits, without any MoE auxiliary loss
            point["train_loss_bits"] = float(trainer.callback_metrics["train/loss_bits"])
            self._update()

    def on_train_end(self, trainer, pl_module):
        batch = self._last_batch
        if not self.steps or batch is None or batch.shape[0] < 2:
            return  # a resumed, already finished run, or batch size 1: no two contexts to compare
        tvd = prediction_tvd(pl_module.model, batch[0], batch[1])
        for logger in trainer.loggers:
            logger.log_metrics({"diagnostics/prediction_tvd": tvd}, step=trainer.global_step)
        self._update(prediction_tvd=tvd, prediction_tvd_step=trainer.global_step)

    def _update(self, **fields) -> None:
        self.diagnostics.update(fields)
        if self.record is not None:
            self.record.update(diagnostics=self.diagnostics)
