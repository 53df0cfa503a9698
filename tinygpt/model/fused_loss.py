"""Cross-entropy fused with the output head, chunked over tokens: the B×T×V logits never exist at once.

Why: with GPT-2's 50,257-token vocabulary (000) the plain path materialises 16·128·50,257 logits (412 MB in
fp32, plus a bf16 copy and a same-sized gradient under autocast), and its log-softmax was 12% of a step. Here
the head's matmul, the log-sum-exp and the gradient are done for `chunk` tokens at a time:

    logits_c = h_c Wᵀ                       (c × V, in the compute dtype)
    logp_c   = log_softmax(logits_c)        (fp32, one pass from the compute dtype)
    loss    += −Σ logp_c[target]
    g_c      = exp(logp_c) − onehot(target) (written in the compute dtype; p − 1 at the target from fp32)
    ∂h_c     = g_c W / N      ∂W += g_cᵀ h_c (scaled by 1/N once, at the end)

so the peak extra memory is one c × V block and each of its elements is touched by few passes: the head's
matmul, the log-softmax, one exp (in place in fp32, into the bf16 operand under autocast) and the two gradient
matmuls. The 1/N of the mean is applied to the d-wide results, not to every V-wide chunk. The gradients are
computed during the forward pass (the chunk's softmax is at hand then; recomputing it in backward would cost a
second head matmul) and backward only scales them by 1/N times the incoming gradient, which is 1 for a loss.
With no gradient needed (validation) only the loss is computed.

Under autocast the matmuls run in the autocast dtype (bf16 on CPU) as `F.linear` would, and the softmax in
fp32, as `F.cross_entropy` over autocast logits would; the gradients are rounded to the inputs' dtypes as the
plain path's are. Tests compare loss and both gradients with the plain path (tests/test_speedups.py).
"""

from __future__ import annotations

import torch

from tinygpt.common.errors import ConfigError

# One chunk's logits block, in elements: about BLOCK_ELEMENTS (2**21 fp32 numbers, 8 MiB: 1,024 tokens at
# V = 2,048), so that the block stays in cache from the head's matmul through the log-softmax and the exp, but
# never fewer than TOKENS_PER_WIDTH tokens per unit of the model's width: each chunk streams the whole (V, d)
# head through three matmuls, once for the logits, once for ∂h and once into ∂W, so at V = 50,257 the old
# 166-token chunks spent as long reading and writing the 49 MiB head and its gradient as computing. And never
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
