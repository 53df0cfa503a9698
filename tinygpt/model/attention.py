"""Causal self-attention with grouped-query heads, optional QK-norm, RoPE and a KV cache."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tinygpt.model.attention_core import CORES
from tinygpt.model.config import GPTConfig
from tinygpt.model.implementation import DEFAULT, Implementation
from tinygpt.model.kv_cache import KVCache
from tinygpt.model.norm import RMSNorm
from tinygpt.model.position import apply_rope


class CausalSelfAttention(nn.Module):
    """n_heads query heads share n_kv_heads key/value heads (n_kv_heads = n_heads: plain multi-head).

    What attention is lives here: the q, k, v projections, QK-norm, RoPE, the causal mask or ALiBi's bias, the KV
    cache of generation. How its core computes is the core it builds from ``implementation`` (the model's share of
    the speed.* switches, tinygpt/model/implementation.py; none is saved in checkpoints): ``speed.attention``
    names a core in tinygpt/model/attention_core.py's CORES, which also owns the dropout masks and the core's dtype.

    ``speed.projections=fused``: q, k and v come from one matmul against the three weights concatenated per
    forward, as litgpt's fused QKV does, while the parameters stay three Linears (names, checkpoints and the HF
    exporter unchanged); the same numbers up to float rounding.
    """

    def __init__(self, config: GPTConfig, layer_index: int, implementation: Implementation = DEFAULT):
        super().__init__()
        self.core = CORES[implementation.attention](implementation.dropout, implementation.attention_dtype)
        self.project = self._fused_projections if implementation.fused else self._projections
        self.layer_index = layer_index  # which of the KV cache's per-layer buffers is this layer's
        self.n_heads, self.n_kv_heads = config.n_heads, config.resolved_kv_heads
        self.head_dim = config.resolved_head_dim
        self.dropout = config.dropout
        d, kv_width = config.d_model, self.n_kv_heads * self.head_dim
        # Separate projections, since keys and values are narrower than queries under GQA (000).
        self.q_proj = nn.Linear(d, self.n_heads * self.head_dim, bias=config.bias)
        self.k_proj = nn.Linear(d, kv_width, bias=config.bias)
        self.v_proj = nn.Linear(d, kv_width, bias=config.bias)
        self.out_proj = nn.Linear(self.n_heads * self.head_dim, d, bias=config.bias)
        # Qwen3's QK-norm: one RMSNorm over head_dim, shared by all heads of the layer.
        self.q_norm = RMSNorm(self.head_dim, config.norm_eps) if config.qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, config.norm_eps) if config.qk_norm else None

    def forward(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
        cache: KVCache | None = None,
        attn_bias: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x: (B, T, d). rope: cos and sin rows for x's positions, or None. cache: past keys and values.
        attn_bias: (n_heads, T, keys) added to the scores before the causal mask (ALiBi), or None."""
        B, T, _ = x.shape
        q, k, v = self.project(x)
        # QK-norm and RoPE act on the (B, T, heads, head_dim) views, in the projections' own memory order, before
        # the heads are moved forward: written to the transposed views instead, RoPE's backward returned its
        # gradients in (B, heads, T) order, and each of q's and k's then cost one more copy back to the
        # projection's (B, T, width) layout (docs/benchmarks/train.md). The values are the same.
        q = q.view(B, T, self.n_heads, self.head_dim)
        k = k.view(B, T, self.n_kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:  # values are never rotated: position decides who attends, not what is passed
            cos, sin = (part.unsqueeze(-2) for part in rope)  # (T, 1, head_dim/2): broadcast over the heads
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = v.view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        if cache is not None and attn_bias is None:
            # Generation: the cache keeps the un-repeated heads; attention runs over its full, fixed-size buffers
            # with the cache's mask hiding the future and the unwritten slots.
            k, v = cache.store(self.layer_index, k, v)
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=cache.mask, enable_gqa=self.n_kv_heads != self.n_heads
            )
        else:
            mask = None  # causal
            if attn_bias is not None:  # an additive bias: the causal mask (or the cache's) joins it as -inf
                if cache is not None:
                    k, v = cache.store(self.layer_index, k, v)
                visible = (
                    cache.mask if cache is not None else torch.ones(T, T, dtype=torch.bool, device=x.device).tril_()
                )
                mask = attn_bias.masked_fill(~visible, float("-inf"))
            y = self.core(q, self._repeat_kv(k), self._repeat_kv(v), mask, self.dropout if self.training else 0.0)
        return self.out_proj(y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim))

    def _projections(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v as (B, T, width) each: one matmul per projection."""
        return self.q_proj(x), self.k_proj(x), self.v_proj(x)

    def _fused_projections(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v as (B, T, width) each: one matmul over the concatenated weights."""
        projections = (self.q_proj, self.k_proj, self.v_proj)
        weight = torch.cat([p.weight for p in projections])
        bias = None if self.q_proj.bias is None else torch.cat([p.bias for p in projections])
        return F.linear(x, weight, bias).split([p.out_features for p in projections], dim=-1)

    def _repeat_kv(self, t: torch.Tensor) -> torch.Tensor:
        """Line each key/value head up with its group of query heads: heads [a, b] become [a, a, b, b]."""
        group = self.n_heads // self.n_kv_heads
        return t if group == 1 else t.repeat_interleave(group, dim=1)
