"""Causal self-attention with grouped-query heads, optional QK-norm, RoPE and a KV cache."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tinygpt.model.config import GPTConfig
from tinygpt.model.dropout import LEVELS, int16_keep_mask, resolved
from tinygpt.model.implementation import DEFAULT, Implementation
from tinygpt.model.kv_cache import KVCache
from tinygpt.model.norm import RMSNorm
from tinygpt.model.position import apply_rope


class CausalSelfAttention(nn.Module):
    """n_heads query heads share n_kv_heads key/value heads (n_kv_heads = n_heads: plain multi-head).

    How it computes is fixed when it is built, from ``implementation`` (tinygpt/model/implementation.py: the
    model's share of the speed.* switches; none is saved in checkpoints).
    `impl` (speed.attention) picks how attention
    dropout is computed while training with dropout > 0: "sdpa" passes dropout_p to
    `scaled_dot_product_attention` (the default: 1.07x "explicit" in a whole step on a 2-core CPU); "explicit"
    writes the softmax out and drops its weights with F.dropout (the same Bernoulli(1 - p) mask and 1/(1 - p)
    scaling). Without dropout both use SDPA, which is exact attention either way (and SDPA's CPU flash kernel
    was about 4x faster than the written-out softmax at T 256, head 48: docs/benchmarks/train.md).
    `dropout_impl` (speed.dropout) "int16" draws the weights' mask from 16-bit random slices
    (tinygpt/model/dropout.py); SDPA cannot take a mask of ours, so it implies the written-out softmax.

    `attention_dtype` (speed.attention_dtype): under bf16/fp16 autocast, "compute" runs the attention core
    (scores, softmax, dropout, weights times values) in autocast's dtype, "float32" in fp32 with autocast off
    (q, k, v cast up, the output cast back), "auto" fp32 for SDPA on a CPU and the compute dtype otherwise (see
    `upcasts`); the projections stay in the compute dtype either way. The KV-cache path (generation) is left as
    it is.

    `fused` (speed.projections): q, k and v come from one matmul against the three
    weights concatenated per forward, as litgpt's fused QKV does, while the parameters stay three Linears
    (names, checkpoints and the HF exporter unchanged); the same numbers up to float rounding.
    """

    def __init__(self, config: GPTConfig, layer_index: int, implementation: Implementation = DEFAULT):
        super().__init__()
        self.impl, self.dropout_impl = implementation.attention, implementation.dropout
        self.attention_dtype, self.fused = implementation.attention_dtype, implementation.fused
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
        q, k, v = self._project(x)
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
        dropout_p = self.dropout if self.training else 0.0
        masks = self.written_out_masks(q.device, dropout_p)
        dtype = q.dtype
        if cache is None and self.upcasts(q, masks):  # the core in fp32, outside autocast (attention_dtype)
            with torch.autocast(q.device.type, enabled=False):
                y = self._core(q.float(), k.float(), v.float(), attn_bias, dropout_p, masks).to(dtype)
        elif cache is None:
            y = self._core(q, k, v, attn_bias, dropout_p, masks)
        elif attn_bias is not None:
            y = self._biased_attention(q, k, v, attn_bias, cache, dropout_p, masks)
        else:
            # The cache keeps the un-repeated heads; attention runs over its full, fixed-size buffers
            # with the cache's mask hiding the future and the unwritten slots.
            k, v = cache.store(self.layer_index, k, v)
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=cache.mask, dropout_p=dropout_p, enable_gqa=self.n_kv_heads != self.n_heads
            )
        return self.out_proj(y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim))

    def _core(self, q, k, v, attn_bias: torch.Tensor | None, dropout_p: float, masks: str | None) -> torch.Tensor:
        """Attention over the window itself (no cache): causal, or with an additive bias (ALiBi)."""
        if attn_bias is not None:  # an additive bias: the causal mask joins it as -inf on the future
            return self._biased_attention(q, k, v, attn_bias, None, dropout_p, masks)
        k, v = self._repeat_kv(k), self._repeat_kv(v)
        if masks is not None:
            return explicit_attention(q, k, v, dropout_p, masks)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout_p)

    def written_out_masks(self, device: torch.device, dropout_p: float) -> str | None:
        """The dropout masks ("torch" or "int16") when attention dropout goes through the written-out softmax
        (speed.attention=explicit, or int16 masks, which SDPA cannot take); None when SDPA computes it all.
        Resolved once per forward."""
        if dropout_p == 0:
            return None
        masks = resolved(self.dropout_impl, device)
        return masks if self.impl == "explicit" or masks == "int16" else None

    def upcasts(self, q: torch.Tensor, masks: str | None) -> bool:
        """Whether the core runs in fp32: q (hence k and v) in a 16-bit dtype, as autocast leaves them, and
        speed.attention_dtype float32; or auto on a CPU when the core is SDPA's, whose CPU kernels ran slower in
        bf16 than in fp32 (a whole bf16 step 1.03-1.17x with the fp32 core), but not the written-out softmax of
        attention dropout, which ran faster in bf16 (0.75x in fp32): docs/benchmarks/train.md."""
        if q.dtype not in (torch.bfloat16, torch.float16) or self.attention_dtype == "compute":
            return False
        if self.attention_dtype == "float32":
            return True
        return q.device.type == "cpu" and masks is None

    def _biased_attention(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        bias: torch.Tensor,
        cache: KVCache | None,
        dropout_p: float,
        masks: str | None,
    ) -> torch.Tensor:
        """SDPA with a float mask: the bias where a query may look, -inf elsewhere (future or unwritten slots)."""
        if cache is None:
            T = q.shape[-2]
            visible = torch.ones(T, T, dtype=torch.bool, device=q.device).tril_()
        else:
            k, v = cache.store(self.layer_index, k, v)
            visible = cache.mask
        mask = bias.to(q.dtype).masked_fill(~visible, float("-inf"))
        k, v = self._repeat_kv(k), self._repeat_kv(v)
        if masks is not None:
            return explicit_attention(q, k, v, dropout_p, masks, additive=mask)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)

    def _project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v as (B, T, width) each: three matmuls, or (fused) one over the concatenated weights."""
        projections = (self.q_proj, self.k_proj, self.v_proj)
        if not self.fused:
            return tuple(p(x) for p in projections)
        weight = torch.cat([p.weight for p in projections])
        bias = None if self.q_proj.bias is None else torch.cat([p.bias for p in projections])
        return F.linear(x, weight, bias).split([p.out_features for p in projections], dim=-1)

    def _repeat_kv(self, t: torch.Tensor) -> torch.Tensor:
        """Line each key/value head up with its group of query heads: heads [a, b] become [a, a, b, b]."""
        group = self.n_heads // self.n_kv_heads
        return t if group == 1 else t.repeat_interleave(group, dim=1)


def explicit_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dropout_p: float,
    dropout_impl: str = "torch",
    additive: torch.Tensor | None = None,
) -> torch.Tensor:
    """softmax(q kᵀ / √d + mask), dropped out with probability dropout_p, times v: what SDPA computes, written
    out so that the dropout is ours to choose. The mask is causal, or `additive` (a float mask with -inf where a
    query may not look: ALiBi's). With int16 masks the 1/(1 - p) is applied to the (B, H, T, head) output
    instead of the (B, H, T, T) weights: the same product, one pass over the large tensor fewer."""
    T, S = q.shape[-2], k.shape[-2]
    scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
    if additive is None:
        future = torch.ones(T, S, dtype=torch.bool, device=q.device).triu_(S - T + 1)
        scores = scores.masked_fill_(future, float("-inf"))
    else:
        scores = scores + additive
    weights = torch.softmax(scores, dim=-1)
    if dropout_impl == "int16" and round(dropout_p * LEVELS) < LEVELS:
        keep, scale = int16_keep_mask(weights.shape, dropout_p, weights.device)
        return (torch.where(keep, weights, 0).to(v.dtype) @ v).mul_(scale)
    return F.dropout(weights, dropout_p, training=True).to(v.dtype) @ v
