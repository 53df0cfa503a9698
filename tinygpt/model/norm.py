"""The norms (000, "Normalizing without the mean"), and NORMS: the registry `model.norm` names.

Layer norm is torch's own `nn.LayerNorm` (its `bias=False` gives GPT-2-without-biases' shift-free norm; the
parameter names, weight and bias, are what checkpoints have always held). RMSNorm is written here: torch's
`nn.RMSNorm` computes the statistic in the input's dtype, and ours takes it in float32 for bf16 runs.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


class RMSNorm(nn.Module):
    """Divide by the root mean square and scale; no mean subtracted, no shift (Zhang and Sennrich, 2019)."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The mean of squares is taken in float32 so that bf16/fp16 activations don't lose the statistic.
        x32 = x.float()
        rms = torch.sqrt(x32.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return self.weight * (x32 / rms).type_as(x)


# model.norm's names and their builders (d, eps, bias): `bias` only affects layer norm, since RMSNorm has no
# shift by definition. GPTConfig checks against the keys; make_norm builds from the values.
NORMS: dict[str, Callable[[int, float, bool], nn.Module]] = {
    "layernorm": lambda d, eps, bias: nn.LayerNorm(d, eps, bias=bias),
    "rmsnorm": lambda d, eps, bias: RMSNorm(d, eps),
}
NORM_TYPES = (nn.LayerNorm, RMSNorm)  # what a norm module is: their gains count as "norms", start at 1


def make_norm(kind: str, d: int, eps: float, bias: bool) -> nn.Module:
    """The configured norm."""
    if kind not in NORMS:
        raise ValueError(f"norm={kind!r} is not allowed: must be one of {', '.join(NORMS)}")
    return NORMS[kind](d, eps, bias)
