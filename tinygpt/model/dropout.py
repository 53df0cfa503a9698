"""Dropout with masks cut from 16-bit slices of random 32-bit words (speed.dropout=int16), or torch's own.

Why: on a CPU, torch's dropout draws one random number per element (a Bernoulli per element of the mask) and
that draw, not the multiply, is most of its cost; at p = 0.2 dropout took about a third of a training step of
nanoGPT's shape on the project's 2-core machine (docs/benchmarks/train.md). One 32-bit word from torch's
generator holds two independent, uniform 16-bit draws, so the mask costs half the words; comparing them with a
threshold is a cheap pass. The price is that the drop probability is rounded to a multiple of 1/65,536
(p = 0.2 becomes 13,107/65,536 = 0.1999969), and the scale is 1/(1 - that), so every element's expectation is
kept exactly, as torch's 1/(1 - p) keeps it for p. The draws come from torch's global generator like torch's
dropout, so seeding and bit-exact resume work the same, but the masks differ from torch's for the same seed.
"""

from __future__ import annotations

import math

import torch
from torch import nn

DROPOUT_IMPLS = ("auto", "torch", "int16")
LEVELS = 1 << 16  # a 16-bit draw takes one of 65,536 values


def resolved(impl: str, device: torch.device) -> str:
    """speed.dropout's "auto": int16 on a CPU, where whole training steps with dropout measured faster
    (docs/benchmarks/train.md); torch's elsewhere, whose CUDA dropout is one fused kernel that int16's three
    passes are not expected to beat (not measured on a GPU)."""
    if impl == "auto":
        return "int16" if device.type == "cpu" else "torch"
    return impl


def int16_keep_mask(shape: torch.Size | tuple[int, ...], p: float, device: torch.device) -> tuple[torch.Tensor, float]:
    """A bool mask of `shape`, True where an element is kept, and the scale that keeps each expectation.

    An element is dropped when its 16-bit draw (uniform over -32,768..32,767) is among the lowest
    round(p * 65,536) values: P(drop) = round(p * 65,536) / 65,536."""
    drops = round(p * LEVELS)
    n = math.prod(shape)
    # the full int32 range: both 16-bit halves of every word are uniform and independent (randint's high is
    # exclusive; a narrower range, such as random_()'s default [0, 2^31), would bias the high half)
    words = torch.randint(-(1 << 31), 1 << 31, ((n + 1) // 2,), dtype=torch.int32, device=device)
    keep = words.view(torch.int16)[:n].view(shape) >= drops - LEVELS // 2
    return keep, LEVELS / (LEVELS - drops)


class _KeepAndScale(torch.autograd.Function):
    """x where kept, 0 elsewhere, times the scale; backward the same on the gradient. Saves only the bool
    mask (as torch's dropout does) and scales in place, so each direction is one allocation."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, keep: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return torch.where(keep, x, 0).mul_(scale)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (keep,) = ctx.saved_tensors
        return torch.where(keep, grad, 0).mul_(ctx.scale), None, None


def dropout(x: torch.Tensor, p: float, training: bool, impl: str) -> torch.Tensor:
    """F.dropout(x, p, training) with the chosen implementation (DROPOUT_IMPLS)."""
    if not training or p == 0.0 or resolved(impl, x.device) == "torch":
        return nn.functional.dropout(x, p, training)
    if round(p * LEVELS) >= LEVELS:
        return x * 0.0  # p = 1: everything dropped, as torch's dropout gives (and keeps the graph)
    keep, scale = int16_keep_mask(x.shape, p, x.device)
    return _KeepAndScale.apply(x, keep, scale)


class Dropout(nn.Dropout):
    """nn.Dropout (same name, no state: checkpoints unchanged) whose masks come from `impl` (speed.dropout):
    torch's, int16, or auto (by device)."""

    def __init__(self, p: float = 0.5, impl: str = "auto"):
        super().__init__(p)
        self.impl = impl

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training, self.impl)
