"""The transformer block: attention and an MLP, each read through a norm and merged into the stream."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from tinygpt.model.attention import CausalSelfAttention
from tinygpt.model.config import GPTConfig
from tinygpt.model.dropout import Dropout
from tinygpt.model.implementation import DEFAULT, Implementation
from tinygpt.model.kv_cache import KVCache
from tinygpt.model.mlp import make_mlp
from tinygpt.model.norm import make_norm


def to_autocast_dtype(x: torch.Tensor) -> torch.Tensor:
    """A sublayer's input in autocast's dtype when autocast is on (x itself otherwise): cast once here.

    Why: the residual stream and the norms stay in fp32 under bf16-mixed, and autocast casts a Linear's input
    at each Linear. A sublayer reads its input with several (q, k and v; SwiGLU's gate and up), so the same
    (B, T, d) activation was cast three or two times forward, and in backward each cast's bf16 gradient was
    cast back to fp32 before they were summed (the "autocast copies" a bf16 profile shows). Casting
    once gives the Linears the very values they would have cast themselves, so the forward is unchanged to
    the bit; in backward the sublayer's input gradients are summed in bf16 before one cast, as they already
    were with fused projections (tests/test_speedups.py).
    """
    device = x.device.type
    if torch.is_autocast_enabled(device) and x.is_floating_point():
        return x.to(torch.get_autocast_dtype(device))
    return x


class Block(nn.Module):
    # speed.compile (set at runtime by tinygpt/train/speedups.py): `step` compiled, which training calls in
    # place of the eager one; validation, evaluation and generation (eval mode, no gradient, or a KV cache) stay
    # eager, so they never compile graphs of their own. None: eager everywhere.
    compiled: Callable | None = None

    def __init__(self, config: GPTConfig, layer_index: int, implementation: Implementation = DEFAULT):
        super().__init__()
        self.prenorm, self.residual = config.prenorm, config.residual
        self.norm1 = make_norm(config.norm, config.d_model, config.norm_eps, config.bias)
        self.attention = CausalSelfAttention(config, layer_index, implementation)
        self.norm2 = make_norm(config.norm, config.d_model, config.norm_eps, config.bias)
        self.mlp = make_mlp(config, implementation)
        # on each sublayer's output, before it reaches the stream
        self.drop = Dropout(config.dropout, implementation.dropout)

    def forward(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
        cache: KVCache | None = None,
        attn_bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The new stream, and the MLP's auxiliary loss (None unless it has one: a mixture of experts).

        rope and attn_bias come from the position encoding (tinygpt/model/position.py), each None if unused."""
        if self.compiled is not None and self.training and cache is None and torch.is_grad_enabled():
            return self.compiled(x, rope, None, attn_bias)
        return self.step(x, rope, cache, attn_bias)

    def step(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
        cache: KVCache | None = None,
        attn_bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """forward's computation, always eager (what speed.compile compiles)."""
        if not self.prenorm:  # the 2017 layout: add, then normalize
            x = self.norm1(self.merge(x, self.drop(self.attention(to_autocast_dtype(x), rope, cache, attn_bias))))
            y, aux_loss = self.mlp(to_autocast_dtype(x))
            return self.norm2(self.merge(x, self.drop(y))), aux_loss
        x = self.merge(x, self.drop(self.attention(to_autocast_dtype(self.norm1(x)), rope, cache, attn_bias)))
        y, aux_loss = self.mlp(to_autocast_dtype(self.norm2(x)))
        return self.merge(x, self.drop(y)), aux_loss

    def merge(self, stream: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        """Add a sublayer's output to the residual stream, or (residual=False) replace the stream by it."""
        return stream + update if self.residual else update
