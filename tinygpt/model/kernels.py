"""The speed kernels a model's modules call, chosen by name (``speed.*``, tinygpt/model/speed.py): dropout masks,
attention cores, and the head fused with the cross-entropy.

Each computes what its plain counterpart computes (a Bernoulli(1 - p) mask scaled by 1/(1 - p); softmax(q·kᵀ)·v;
the mean cross-entropy of the head's logits), differently: tests/test_speedups.py and tests/test_dropout.py
compare each with the plain path. They live apart from the model (tinygpt/model/gpt.py) because they are how a
computation runs, not what the model is.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from tinygpt.common.errors import ConfigError

# --------------------------------------------------------------------------------------------------------------------
# Dropout with masks cut from 16-bit slices of random 32-bit words (speed.dropout=int16), or torch's own.
#
# Why: on a CPU, torch's dropout draws one random number per element (a Bernoulli per element of the mask) and
# that draw, not the multiply, is most of its cost; at p = 0.2 dropout took about a third of a training step of
# nanoGPT's shape on the project's 2-core machine (docs/benchmarks/train.md). One 32-bit word from torch's
# generator holds two independent, uniform 16-bit draws, so the mask costs half the words; comparing them with a
# threshold is a cheap pass. The price is that the drop probability is rounded to a multiple of 1/65,536
# (p = 0.2 becomes 13,107/65,536 = 0.1999969), and the scale is 1/(1 - that), so every element's expectation is
# kept exactly, as torch's 1/(1 - p) keeps it for p. The draws come from torch's global generator like torch's
# dropout, so seeding and bit-exact resume work the same, but the masks differ from torch's for the same seed.
# --------------------------------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------------------------------
# How attention's core, softmax(q kᵀ/√d + mask) v with dropout, is computed: the ``speed.attention`` registry.
#
# ``CausalSelfAttention`` (attention.py) says what attention is (projections, heads, QK-norm, RoPE, the mask); it
# builds one core here, from the model's SpeedConfig (tinygpt/model/speed.py), and hands it q, k, v, the
# mask and the dropout probability. Which kernel runs, how dropout's mask is drawn and in which dtype is decided by
# the core it built, so its forward has no speed branches. Every core computes the same attention; they differ in
# speed and in which random numbers dropout uses:
#
# - ``sdpa`` (the default): ``scaled_dot_product_attention`` with dropout inside it (torch's masks): faster than the
#   written-out softmax in whole steps on a CPU, its flash kernel most of all (docs/benchmarks/train.md).
# - ``explicit``: while training with dropout, the softmax written out and its weights dropped (the same
#   Bernoulli(1 - p) mask and 1/(1 - p) scale as ``F.dropout``): dropout is then ours to choose. Without dropout it
#   is SDPA, exact attention either way.
#
# ``speed.dropout=int16`` (16-bit random slices, tinygpt/model/kernels.py) needs the written-out softmax, since SDPA
# cannot take a mask of ours; ``auto`` resolves by device when the core runs (int16 on a CPU), because a model is
# built before it is moved.
#
# ``speed.attention_dtype`` under bf16/fp16 autocast: ``compute`` keeps autocast's dtype, ``float32`` runs the core in
# fp32 with autocast off (q, k, v cast up, the output cast back), ``auto`` fp32 when SDPA computes on a CPU (its CPU
# kernels are slower in bf16 than in fp32) and the compute dtype for the written-out softmax (slower in fp32) and on
# other devices. The projections stay in the compute dtype either way.
# --------------------------------------------------------------------------------------------------------------------

SIXTEEN_BIT = (torch.bfloat16, torch.float16)


class SDPACore:
    """``speed.attention=sdpa``: SDPA computes everything it can; int16 dropout masks go through the written-out
    softmax."""

    always_written_out = False

    def __init__(self, dropout_masks: str, attention_dtype: str):
        self.dropout_masks, self.attention_dtype = dropout_masks, attention_dtype

    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None,
        dropout_p: float,
        scale: float | None = None,
    ) -> torch.Tensor:
        """q, k, v: (B, heads, T or keys, head_dim), k and v with as many heads as q. mask: None (causal), or a
        float mask added to the scores, -inf where a query may not look (ALiBi's). scale: the scores' scale,
        None for 1/√head_dim (μP's differs: tinygpt/model/mup.py)."""
        masks = self.written_out_masks(q.device, dropout_p)
        if self.upcasts(q, masks):
            with torch.autocast(q.device.type, enabled=False):
                y = compute(q.float(), k.float(), v.float(), mask, dropout_p, masks, scale)
            return y.to(q.dtype)
        return compute(q, k, v, mask, dropout_p, masks, scale)

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
    scale: float | None = None,
) -> torch.Tensor:
    mask = None if mask is None else mask.to(q.dtype)
    if masks is not None:
        return explicit_attention(q, k, v, dropout_p, masks, additive=mask, scale=scale)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=mask is None, dropout_p=dropout_p, scale=scale
    )


def explicit_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    dropout_p: float,
    dropout_impl: str = "torch",
    additive: torch.Tensor | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """softmax(q kᵀ · scale + mask) (scale None: 1/√d), dropped out with probability dropout_p, times v: what SDPA
    computes, written out so that the dropout is ours to choose. The mask is causal, or `additive` (a float mask
    with -inf where a query may not look: ALiBi's). With int16 masks the 1/(1 - p) is applied to the (B, H, T,
    head) output instead of the (B, H, T, T) weights: the same product, one pass over the large tensor fewer."""
    T, S = q.shape[-2], k.shape[-2]
    scores = (q * (q.shape[-1] ** -0.5 if scale is None else scale)) @ k.transpose(-2, -1)
    if additive is None:
        future = torch.ones(T, S, dtype=torch.bool, device=q.device).triu_(S - T + 1)
        scores = scores.masked_fill_(future, float("-inf"))
    else:
        scores = scores + additive
    weights = torch.softmax(scores, dim=-1)
    if dropout_impl == "int16" and round(dropout_p * LEVELS) < LEVELS:
        keep, keep_scale = int16_keep_mask(weights.shape, dropout_p, weights.device)
        return (torch.where(keep, weights, 0).to(v.dtype) @ v).mul_(keep_scale)
    return F.dropout(weights, dropout_p, training=True).to(v.dtype) @ v


# --------------------------------------------------------------------------------------------------------------------
# Cross-entropy fused with the output head, chunked over tokens: the B×T×V logits never exist at once.
#
# Why: with GPT-2's 50,257-token vocabulary (000) the plain path materialises 16·128·50,257 logits (412 MB in
# fp32, plus a bf16 copy and a same-sized gradient under autocast), and its log-softmax was 12% of a step. Here
# the head's matmul, the log-sum-exp and the gradient are done for `chunk` tokens at a time:
#
#     logits_c = h_c Wᵀ                       (c × V, in the compute dtype)
#     logp_c   = log_softmax(logits_c)        (fp32, one pass from the compute dtype)
#     loss    += −Σ logp_c[target]
#     g_c      = exp(logp_c) − onehot(target) (written in the compute dtype; p − 1 at the target from fp32)
#     ∂h_c     = g_c W / N      ∂W += g_cᵀ h_c (scaled by 1/N once, at the end)
#
# so the peak extra memory is one c × V block and each of its elements is touched by few passes: the head's
# matmul, the log-softmax, one exp (in place in fp32, into the bf16 operand under autocast) and the two gradient
# matmuls. The 1/N of the mean is applied to the d-wide results, not to every V-wide chunk. The gradients are
# computed during the forward pass (the chunk's softmax is at hand then; recomputing it in backward would cost a
# second head matmul) and backward only scales them by 1/N times the incoming gradient, which is 1 for a loss.
# With no gradient needed (validation) only the loss is computed.
#
# Under autocast the matmuls run in the autocast dtype (bf16 on CPU) as `F.linear` would, and the softmax in
# fp32, as `F.cross_entropy` over autocast logits would; the gradients are rounded to the inputs' dtypes as the
# plain path's are. Tests compare loss and both gradients with the plain path (tests/test_speedups.py).
# --------------------------------------------------------------------------------------------------------------------

# One chunk's logits block, in elements: about BLOCK_ELEMENTS (2**21 fp32 numbers, 8 MiB: 1,024 tokens at
# V = 2,048), so that the block stays in cache from the head's matmul through the log-softmax and the exp, but
# never fewer than TOKENS_PER_WIDTH tokens per unit of the model's width: each chunk streams the whole (V, d)
# head through three matmuls, once for the logits, once for ∂h and once into ∂W, so at GPT-2's vocabulary smaller
# chunks spent as much time moving the head and its gradient as computing. And never
# more than MAX_ELEMENTS (2**26, 256 MiB in fp32), which bounds the extra memory for large vocabularies and
# widths. Chosen on whole-step timings of GPT-2's and a 2,048-token vocabulary (docs/benchmarks/train.md).
BLOCK_ELEMENTS = 2**21
TOKENS_PER_WIDTH = 4
MAX_ELEMENTS = 2**26


def auto_chunk(vocab_size: int, d_model: int) -> int:
    """Tokens per chunk for a (vocab_size, d_model) head: BLOCK_ELEMENTS of logits, at least TOKENS_PER_WIDTH
    x d_model tokens, at most MAX_ELEMENTS of logits, and never under 32 tokens."""
    tokens = max(BLOCK_ELEMENTS // vocab_size, TOKENS_PER_WIDTH * d_model)
    return max(32, min(tokens, MAX_ELEMENTS // vocab_size))


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx, hidden: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, targets: torch.Tensor, chunk: int
    ):
        n = hidden.shape[0]
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        need_b = bias is not None and ctx.needs_input_grad[2]
        # the unscaled sums: the 1/n of the mean is applied once to these (d-wide) results in backward, not to
        # every (V-wide) chunk of probabilities
        grad_h = torch.empty_like(hidden) if need_h else None
        grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if need_w else None
        grad_b = torch.zeros(bias.shape, dtype=torch.float32, device=bias.device) if need_b else None
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        with torch.autocast(hidden.device.type, enabled=False):  # dtypes are chosen by the caller
            for start in range(0, n, chunk):
                h = hidden[start : start + chunk]
                t = targets[start : start + chunk]
                rows = torch.arange(len(t), device=t.device)
                logits = h @ weight.T if bias is None else torch.addmm(bias, h, weight.T)
                # one pass from the compute dtype's logits to fp32 log-probabilities (no separate fp32 copy,
                # no separate subtraction of the log-sum-exp)
                log_probs = torch.log_softmax(logits, dim=-1, dtype=torch.float32)
                del logits
                target_log_probs = log_probs[rows, t]
                total -= target_log_probs.sum()
                if need_h or need_w or need_b:
                    # softmax - onehot, written straight in the matmuls' dtype. The target entries, p - 1, are
                    # set from fp32: rounding p to bf16 first would lose a confident prediction's p - 1 whole.
                    if hidden.dtype == log_probs.dtype:
                        g = log_probs.exp_()
                    else:
                        g = torch.exp(log_probs, out=torch.empty_like(log_probs, dtype=hidden.dtype))
                    g[rows, t] = torch.expm1(target_log_probs).to(g.dtype)
                    if need_b:
                        grad_b.add_(g.sum(0, dtype=torch.float32))
                    if need_h:
                        torch.mm(g, weight, out=grad_h[start : start + chunk])
                    if need_w:
                        if g.dtype == grad_w.dtype:
                            grad_w.addmm_(g.T, h)
                        else:
                            grad_w.add_(g.T @ h)
        ctx.save_for_backward(grad_h, grad_w, grad_b)
        ctx.n = n
        ctx.weight_dtype = weight.dtype
        ctx.bias_dtype = None if bias is None else bias.dtype
        return total / n

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        grad_h, grad_w, grad_b = ctx.saved_tensors
        scale = grad_out / ctx.n  # the mean's 1/n and the incoming gradient (1 for a loss), in one factor
        dh = grad_h * scale.to(grad_h.dtype) if grad_h is not None else None
        dw = (grad_w * scale).to(ctx.weight_dtype) if grad_w is not None else None
        db = (grad_b * scale).to(ctx.bias_dtype) if grad_b is not None else None
        return dh, dw, db, None, None


def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    chunk: int | None = None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean cross-entropy (nats) of `F.linear(hidden, weight, bias)` against `targets`, chunked over tokens.

    hidden: (..., d); weight: (V, d), the head (or the tied embedding table); targets: (...) ids in [0, V);
    bias: (V,) or None (the GPT's head has none; the LSTM's has one).
    Equals `F.cross_entropy(F.linear(hidden, weight, bias).flatten(0, -2).float(), targets.flatten())`, with
    the same gradients, in fp32 and under autocast. chunk: tokens per chunk (None: `auto_chunk(V, d)`).
    """
    if chunk is not None and chunk <= 0:
        raise ConfigError(f"chunk={chunk} is not allowed: must be a positive number of tokens (or None for auto)")
    hidden = hidden.reshape(-1, hidden.shape[-1])
    targets = targets.reshape(-1)
    if hidden.shape[0] != targets.shape[0]:
        raise ConfigError(f"{hidden.shape[0]} hidden rows but {targets.shape[0]} targets")
    device = hidden.device.type
    if torch.is_autocast_enabled(device):  # what F.linear would do under autocast: both operands cast
        dtype = torch.get_autocast_dtype(device)
        hidden, weight = hidden.to(dtype), weight.to(dtype)
        bias = None if bias is None else bias.to(dtype)
    elif hidden.dtype != weight.dtype:
        hidden = hidden.to(weight.dtype)
    return _LinearCrossEntropy.apply(hidden, weight, bias, targets, chunk or auto_chunk(*weight.shape))
