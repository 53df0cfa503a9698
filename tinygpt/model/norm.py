"""Layer norm and RMSNorm (000, "Normalizing without the mean")."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class LayerNorm(nn.Module):
    """Subtract the mean, divide by the (biased) standard deviation, then scale and, if `bias`, shift."""

    def __init__(self, d: int, eps: float = 1e-5, bias: bool = True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # F.layer_norm computes exactly weight * (x - mean) / sqrt(var + eps) + bias, in one fused kernel.
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


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


def make_norm(kind: str, d: int, eps: float, bias: bool) -> nn.Module:
    """The configured norm; `bias` only affects layer norm, since RMSNorm has no shift by definition."""
    if kind == "layernorm":
        return LayerNorm(d, eps, bias=bias)
    if kind == "rmsnorm":
        return RMSNorm(d, eps)
    raise ValueError(f"norm={kind!r} is not allowed: must be one of layernorm, rmsnorm")
