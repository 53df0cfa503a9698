"""Eval-mode scopes: score, sample or measure a model without dropout, then give it back the mode it had.

Scoring a dev split in the middle of training, sampling from a model that is training, measuring collapse
diagnostics: each must switch dropout off, and must leave a training model training afterwards even when it
raises. One context manager does both, so no caller can forget the restore (a model left in eval mode would
silently train without dropout).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def eval_mode(model: Any) -> Iterator[Any]:
    """``with eval_mode(model): ...`` runs the block with ``model.eval()`` and restores ``model.train(mode)``
    afterwards. Anything that is not an ``nn.Module`` (a plain function returning logits) passes through."""
    if not hasattr(model, "training") or not hasattr(model, "train"):
        yield model
        return
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)
