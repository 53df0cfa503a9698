"""A Lightning callback for tests, added from the config (``+callbacks.batch_log._target_=batch_log.BatchLog``):
each rank writes the input windows of every training step it ran to ``<folder>/windows.rank<r>.json``."""

from __future__ import annotations

import json
from pathlib import Path

import lightning as L


class BatchLog(L.Callback):
    def __init__(self, folder: str):
        self.folder = Path(folder)
        self.windows: dict[int, list[list[int]]] = {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.windows[trainer.global_step + 1] = batch[0].tolist()

    def on_train_end(self, trainer, pl_module):
        path = self.folder / f"windows.rank{trainer.global_rank}.json"
        path.write_text(json.dumps({str(step): rows for step, rows in self.windows.items()}))
