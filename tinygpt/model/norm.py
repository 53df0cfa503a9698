"""The norms (000, "Normalizing without the mean"), and NORMS: the registry `model.norm` names.

Layer norm is torch's own `nn.LayerNorm` (its `bias=False` gives GPT-2-without-biases' shift-free norm; the
parameter names, weight and bias, are what checkpoints have always held). RMSNorm is written here: torch's
`nn.RMSNorm` computes the statistic in the input's dtype, and ours takes it in float32 for bf16 runs. Its
backward is written out too (`_RMSNormFunction`): autograd's record of the formula made about 12 passes over
the (tokens, d) activations in backward and saved three of them; the written-out one makes 6 and saves only
the input (docs/benchmarks/train.md).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from tinygpt.common.errors import ConfigError


class _RMSNormFunction(torch.autograd.Function):
    """y = w · x̂ with x̂ = x · r, r = 1/√(mean(x²) + ε) per row, and its gradient written out:

        ∂w = Σ_rows g · x̂ = (g ⊙ x)ᵀ r                     (one product pass, one matrix-vector product)
        ∂x = r · (g ⊙ w) − x · r³ · ((g ⊙ x) w) / d         (the row dot products from the same g ⊙ x)

    so backward reads g and x and writes (g ⊙ x), (g ⊙ w) in place into ∂x, and nothing else of their size.
    Rows are the last dimension's vectors; x arrives as (rows, d). The statistic and the gradient are fp32
    whatever x's dtype (x̂ is rounded to x's dtype before the gain, as the formula was written); ∂x is
    rounded back to x's dtype. Not differentiable twice (nothing here needs it)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        x32 = x.float()
        # ‖x‖² / d from one reading pass (vector_norm keeps no squared copy), then the (rows, 1) factor
        r = torch.linalg.vector_norm(x32, dim=-1, keepdim=True).square_().div_(x.shape[-1]).add_(eps).rsqrt_()
        ctx.save_for_backward(x, weight, r)
        normed = x32 * r
        if x.dtype != torch.float32:
            return weight * normed.to(x.dtype)
        return normed.mul_(weight) if weight.dtype == normed.dtype else weight * normed

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor):
        x, weight, r = ctx.saved_tensors
        x32, g = x.float(), grad.float()
        w = weight.float()
        gx = g * x32
        grad_w = None
        if ctx.needs_input_grad[1] and x.dtype != torch.float32:  # the gain multiplied x̂ rounded to x's dtype
            grad_w = (g * (x32 * r).to(x.dtype)).sum(0, dtype=torch.float32).to(weight.dtype)
        elif ctx.needs_input_grad[1]:
            grad_w = (gx.T @ r).squeeze(-1).to(weight.dtype)
        grad_x = None
        if ctx.needs_input_grad[0]:
            coef = (gx @ w).unsqueeze_(-1).mul_(r.pow(3)).div_(-x.shape[-1])
            grad_x = (g * w).mul_(r).addcmul_(x32, coef).to(x.dtype)
        return grad_x, grad_w, None


class RMSNorm(nn.Module):
    """Divide by the root mean square and scale; no mean subtracted, no shift (Zhang and Sennrich, 2019)."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The mean of squares is taken in float32 so that bf16/fp16 activations don't lose the statistic.
        rows = x.reshape(-1, x.shape[-1])
        return _RMSNormFunction.apply(rows, self.weight, self.eps).view(x.shape)


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
        raise ConfigError(f"norm={kind!r} is not allowed: must be one of {', '.join(NORMS)}")
    return NORMS[kind](d, eps, bias)
