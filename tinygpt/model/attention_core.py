"""How attention's core, softmax(q kᵀ/√d + mask) v with dropout, is computed: the ``speed.attention`` registry.

``CausalSelfAttention`` (attention.py) says what attention is (projections, heads, QK-norm, RoPE, the mask); it
builds one core here, from the model's Implementation (tinygpt/model/implementation.py), and hands it q, k, v, the
mask and the dropout probability. Which kernel runs, how dropout's mask is drawn and in which dtype is decided by
the core it built, so its forward has no speed branches. Every core computes the same attention; they differ in
speed and in which random numbers dropout uses:

- ``sdpa`` (the default): ``scaled_dot_product_attention`` with dropout inside it (torch's masks): faster than the
  written-out softmax in whole steps on a CPU, its flash kernel most of all (docs/benchmarks/train.md).
- ``explicit``: while training with dropout, the softmax written out and its weights dropped (the same
  Bernoulli(1 - p) mask and 1/(1 - p) scale as ``F.dropout``): dropout is then ours to choose. Without dropout it
  is SDPA, exact attention either way.

``speed.dropout=int16`` (16-bit random slices, tinygpt/model/dropout.py) needs the written-out softmax, since SDPA
cannot take a mask of ours; ``auto`` resolves by device when the core runs (int16 on a CPU), because a model is
built before it is moved.

``speed.attention_dtype`` under bf16/fp16 autocast: ``compute`` keeps autocast's dtype, ``float32`` runs the core in
fp32 with autocast off (q, k, v cast up, the output cast back), ``auto`` fp32 when SDPA computes on a CPU (its CPU
kernels are slower in bf16 than in fp32) and the compute dtype for the written-out softmax (slower in fp32) and on
other devices. The projections stay in the compute dtype either way.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tinygpt.model.dropout import LEVELS, int16_keep_mask, resolved

SIXTEEN_BIT = (torch.bfloat16, torch.float16)


class SDPACore:
    """``speed.attention=sdpa``: SDPA computes everything it can; int16 dropout masks go through the written-out
    softmax."""

    always_written_out = False

    def __init__(self, dropout_masks: str, attention_dtype: str):
        self.dropout_masks, self.attention_dtype = dropout_masks, attention_dtype

    def __call__(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, dropout_p: float
    ) -> torch.Tensor:
        """q, k, v: (B, heads, T or keys, head_dim), k and v with as many heads as q. mask: None (causal), or a
        float mask added to the scores, -inf where a query may not look (ALiBi's)."""
        masks = self.written_out_masks(q.device, dropout_p)
        if self.upcasts(q, masks):
            with torch.autocast(q.device.type, enabled=False):
                y = compute(q.float(), k.float(), v.float(), mask, dropout_p, masks)
            return y.to(q.dtype)
        return compute(q, k, v, mask, dropout_p, masks)

    def written_out_masks(self, device: torch.device, dropout_p: float) -> str | None:
        """The dropout masks ("torch" or "int16") when dropout goes through the written-out softmax; None when
        SDPA computes it all."""
        if dropout_p == 0:
            return None
        masks = resolved(self.dropout_masks, device)
        return masks if self.always_written_out or masks == "int16" else None

    def upcasts(self, q: torch.Tensor, masks: str | None) -> bool:
        """Whether the core runs in fp32: q (hence k and v) in a 16-bit dtype, as autocast leaves them, and
        attention_dtype float32, or auto with SDPA on a CPU."""
        if q.dtype not in SIXTEEN_BIT or self.attention_dtype == "compute":
            return False
        return self.attention_dtype == "float32" or (q.device.type == "cpu" and masks is None)


class WrittenOutCore(SDPACore):
    """``speed.attention=explicit``: attention dropout through the written-out softmax, whatever the masks."""

    always_written_out = True


CORES: dict[str, type[SDPACore]] = {"sdpa": SDPACore, "explicit": WrittenOutCore}


def compute(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    dropout_p: float,
    masks: str | None,
) -> torch.Tensor:
    mask = None if mask is None else mask.to(q.dtype)
    if masks is not None:
        return explicit_attention(q, k, v, dropout_p, masks, additive=mask)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None, dropout_p=dropout_p)


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
