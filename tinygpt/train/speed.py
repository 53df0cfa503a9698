"""Tokens per second and model FLOPs utilization (MFU), logged every step.

FLOPs per token (tinygpt/model/families.py, passed in by the run) follow 003 and PaLM: 6N for the parameters, plus
12·L·T·D for attention's own scores and weighted sums. MFU divides the achieved rate by a *measured* peak
of the machine (``speed.peak_flops``), never a datasheet number: on this project's 2-core CPU, 205 GFLOP/s
fp32 and 865 GFLOP/s bf16 from a large matmul. Lightning's ThroughputMonitor only knows GPU datasheet
peaks and logs outside ``self.log`` (so not in the progress bar), hence this small callback.
"""

from __future__ import annotations

import time
from collections import deque

import lightning as L


class SpeedMonitor(L.Callback):
    def __init__(self, flops_per_token: int, peak_flops: float | None, window: int = 20):
        self.flops_per_token = flops_per_token
        self.peak_flops = peak_flops
        self.window = window
        self._marks: deque[tuple[float, int]] = deque(maxlen=window + 1)
        self.tokens_per_sec = float("nan")

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
