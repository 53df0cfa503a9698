"""The feed-forward sublayers, GELU MLPs (GPT-2's tanh form and the exact one), SwiGLU and a mixture of SwiGLU
experts (000), and MLPS: the registry `model.mlp` names.

Every MLP returns (output, auxiliary loss or None), so the block and the training loop treat a mixture of
experts like any other MLP; `has_aux_loss` says whether the second item is ever a tensor (it decides whether
training logs train/moe_aux_loss).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from tinygpt.common.errors import ConfigError
from tinygpt.model.implementation import DEFAULT, Implementation

if TYPE_CHECKING:
    from tinygpt.model.config import GPTConfig


# model.mlp's two-matrix GELU MLPs and the form each computes (F.gelu's `approximate`). "gelu" is the tanh
# approximation, as GPT-2 (and chapter 4's GELU class) compute it, exported as transformers' "gelu_new";
# "gelu_exact" is x·Φ(x) with the erf, as nanoGPT's nn.GELU(), BERT and GPT-NeoX compute it, transformers'
# "gelu". The two differ by up to 4.7e-4 per activation (at x = ±2.70): a model trained with one is a different
# function under the other, so they are two names, not a tolerance. On CPUs torch's tanh form is also the
# slower kernel (forward and backward 13.9 ms against 6.7 at 8,192 x 768: docs/benchmarks/train.md).
GELUS: dict[str, str] = {"gelu": "tanh", "gelu_exact": "none"}


class GeluMLP(nn.Module):
    """Expand, GELU, project back: GPT-2's feed-forward network (two matrices).

    approximate: "tanh" or "none" (GELUS' values), passed to F.gelu.
    """

    def __init__(self, d: int, hidden: int, bias: bool = True, approximate: str = "tanh"):
        super().__init__()
        self.fc = nn.Linear(d, hidden, bias=bias)
        self.proj = nn.Linear(hidden, d, bias=bias)
        self.approximate = approximate

    has_aux_loss = False

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
        return self.proj(F.gelu(self.fc(x), approximate=self.approximate)), None


class SwiGLU(nn.Module):
    """down(SiLU(gate(x)) * up(x)) (Shazeer, 2020), three matrices.

    Never has biases, whatever GPTConfig.bias says: 000's SwiGLU is bias-free, and its "+ SwiGLU only"
    count (28,916,736, on a model whose other layers have biases) depends on it.

    `fused` (speed.projections, chosen when built): gate and up as one matmul against their weights concatenated
    per forward; the parameters and their names stay as they are.
    """

    def __init__(self, d: int, hidden: int, fused: bool = False):
        super().__init__()
        self.fused = fused
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    has_aux_loss = False

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
        if self.fused:
            gate, up = F.linear(x, torch.cat([self.gate.weight, self.up.weight])).chunk(2, dim=-1)
        else:
            gate, up = self.gate(x), self.up(x)
        return self.down(F.silu(gate) * up), None


def route(router_logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each token's top_k experts and their weights, a softmax over just the chosen scores.

    router_logits: (tokens, n_experts). Returns weights and expert indices, each (tokens, top_k).
    Scores [2.0, -1.0, 0.5, 1.5] with top_k=2 give experts [0, 3] with weights [0.62, 0.38].
    """
    scores, chosen = router_logits.topk(top_k, dim=-1)
    return torch.softmax(scores, dim=-1), chosen


def load_balancing_loss(router_logits: torch.Tensor, chosen: torch.Tensor, n_experts: int) -> torch.Tensor:
    """Switch Transformer's auxiliary loss, n_experts * sum_i f_i * P_i.

    f_i is the fraction of routing assignments that went to expert i (tokens x top_k of them, so the f_i
    sum to 1) and P_i the mean router probability of expert i. It is 1 when routing is uniform and grows
    to n_experts when everything goes to one expert. Only P carries a gradient; f comes from a top-k.
    """
    probs = torch.softmax(router_logits.float(), dim=-1)
    assigned = F.one_hot(chosen, n_experts).float()  # (tokens, top_k, n_experts)
    fraction = assigned.sum(dim=(0, 1)) / chosen.numel()
    return n_experts * (fraction * probs.mean(dim=0)).sum()


class MoE(nn.Module):
    """A router picks top_k of n_experts SwiGLU networks per token and mixes their outputs (000)."""

    def __init__(self, d: int, hidden: int, n_experts: int, top_k: int, fused: bool = False):
        super().__init__()
        self.router = nn.Linear(d, n_experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(d, hidden, fused) for _ in range(n_experts))
        self.top_k = top_k

    has_aux_loss = True

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x: (..., d). Returns the mixed output, shaped like x, and the load-balancing loss (unweighted)."""
        flat = x.reshape(-1, x.shape[-1])
        router_logits = self.router(flat)
        weights, chosen = route(router_logits, self.top_k)
        # The weighted sum in fp32 under autocast: the input arrives there in bf16 (cast once by the block,
        # tinygpt/model/block.py), and the sum is taken as it was when autocast left the input in fp32.
        dtype = torch.float32 if torch.is_autocast_enabled(x.device.type) else flat.dtype
        out = torch.zeros(flat.shape, dtype=dtype, device=flat.device)
        # Dispatch by expert: each expert runs once, on all the tokens that chose it (in either slot).
        for e, expert in enumerate(self.experts):
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            contribution = weights[rows, slot, None].to(dtype) * expert(flat[rows])[0]
            out = out.index_add(0, rows, contribution)
        return out.view_as(x), load_balancing_loss(router_logits, chosen, len(self.experts))


# model.mlp's names and their builders (config, implementation) -> module: GPTConfig checks against the keys, the
# block builds from the values. The implementation says how it computes (speed.projections: .fused).
MLPS: dict[str, Callable[[GPTConfig, Implementation], nn.Module]] = {
    **{
        name: (lambda c, i, form=form: GeluMLP(c.d_model, c.resolved_mlp_hidden, bias=c.bias, approximate=form))
        for name, form in GELUS.items()
    },
    "swiglu": lambda c, i: SwiGLU(c.d_model, c.resolved_mlp_hidden, i.fused),
    "moe": lambda c, i: MoE(c.d_model, c.resolved_mlp_hidden, c.n_experts, c.top_k, i.fused),
}


def make_mlp(config: GPTConfig, implementation: Implementation = DEFAULT) -> nn.Module:
    if config.mlp not in MLPS:
        raise ConfigError(f"mlp={config.mlp!r} is not allowed: must be one of {', '.join(MLPS)}")
    return MLPS[config.mlp](config, implementation)
