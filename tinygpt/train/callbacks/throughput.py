"""Tokens per second and model FLOPs utilization (MFU), logged every step: the throughput monitor.

FLOPs per token (the model's own ``flops_per_token()``, read when training starts) follow 003 and PaLM: 6N for the
parameters, plus 12·L·T·D for attention's own scores and weighted sums. MFU divides the achieved rate by a
*measured* peak of the machine (tinygpt/train/peak.py): ``speed.peak_flops.<precision>`` when the user has
measured it, else a large matmul in the run's compute dtype timed by this process at the start of training.
Lightning's ThroughputMonitor only knows GPU datasheet peaks and logs outside ``self.log`` (so not in the progress
bar), hence this small callback. A half-precision run whose peak is measured also times an fp32 matmul (only on
that path) and warns once, with both figures, where its own is lower.
"""

from __future__ import annotations

import time
from collections import deque

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_warn

from tinygpt.common.say import say
from tinygpt.train.peak import DISTURBED, compute_dtype, matmul_rates, slow_half_precision
from tinygpt.train.record import run_record


class ThroughputMonitor(L.Callback):
    def __init__(self, peak_flops: float | None, window: int = 20):
        """peak_flops: ``speed.peak_flops``, None to measure it when training starts, in the Trainer's precision;
        the peak that MFU divides by goes into the run record's provenance, when the run has a record."""
        self.flops_per_token = 0  # the model's, when training starts
        self.peak_flops = peak_flops
        self.precision = "32-true"  # the Trainer's, when training starts
        self.window = window
        self._marks: deque[tuple[float, int]] = deque(maxlen=window + 1)
        self.tokens_per_sec = float("nan")

    def on_train_start(self, trainer, pl_module):
        self.flops_per_token = pl_module.model.flops_per_token()
        self.precision = str(trainer.precision)
        source = "speed.peak_flops" if self.peak_flops is not None else "measured"
        if self.peak_flops is None:
            dtype = compute_dtype(self.precision)
            rates = matmul_rates(dtype, pl_module.device)
            self.peak_flops = max(rates)
            if trainer.is_global_zero:
                say(
                    f"MFU against this machine's matmul peak, measured now: "
                    f"{self.peak_flops / 1e9:,.1f} GFLOP/s ({self.precision}; set speed.peak_flops "
                    "to fix it)"
                )
                if max(rates) > DISTURBED * min(rates):
                    say(
                        f"the peak's {len(rates)} matmuls ranged from {min(rates) / 1e9:,.1f} to "
                        f"{max(rates) / 1e9:,.1f} GFLOP/s: something else is using the cores, so this peak and the "
                        "MFU against it mean little; measure on a quiet machine and set speed.peak_flops"
                    )
            if dtype != torch.float32:
                fp32_peak = max(matmul_rates(torch.float32, pl_module.device))
                warning = slow_half_precision(self.precision, self.peak_flops, fp32_peak)
                if warning:
                    rank_zero_warn(warning)
        record = run_record(trainer)
        if record is not None:
            record.note_peak(self.peak_flops, source)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        tokens = batch[0].numel() * trainer.world_size
        self._marks.append((time.perf_counter(), tokens))
        if len(self._marks) < 2:
            return
        elapsed = self._marks[-1][0] - self._marks[0][0]
        counted = sum(n for _, n in list(self._marks)[1:])
        self.tokens_per_sec = counted / elapsed
        pl_module.log("train/tokens_per_sec", self.tokens_per_sec, prog_bar=True)
        if self.peak_flops:
            pl_module.log("train/mfu", self.tokens_per_sec * self.flops_per_token / self.peak_flops)

    def on_validation_start(self, trainer, pl_module):
        # validation time is not training throughput
        self._marks.clear()
