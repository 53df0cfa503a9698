"""003's collapse diagnostics: has the model stopped using its input?

A model without residual connections can settle on the one output that ignores its input (the unigram
distribution). Two measurements show it: the gradient reaching each layer's attention weights falls by
orders of magnitude, and the predictions for two different contexts become identical.
"""

from __future__ import annotations

import torch

from tinygpt.common.modes import eval_mode
from tinygpt.model import GPT


def attention_grad_norms(model: GPT) -> list[float]:
    """Per layer, the L2 norm of the gradient at the attention's input projections (query, key and value
    weights together: 003's fused ``qkv.weight``). Call after backward, before clipping."""
    norms = []
    for layer, block in enumerate(model.blocks, start=1):
        attention = block.attention
        grads = [p.grad for p in (attention.q_proj.weight, attention.k_proj.weight, attention.v_proj.weight)]
        if any(g is None for g in grads):
            raise RuntimeError(f"layer {layer}: the attention weights have no gradient; call after backward()")
        norms.append(float(torch.sqrt(sum(g.detach().float().pow(2).sum() for g in grads))))
    return norms


@torch.no_grad()
def prediction_tvd(model: GPT, context_a: torch.Tensor, context_b: torch.Tensor) -> float:
    """Total variation distance, 0.5 * sum |p - q|, between the next-token distributions the model predicts
    after two contexts (1-D token ids). 0: the output does not depend on the input; 1: disjoint supports.
    Runs in eval mode (no dropout) and restores the model's mode."""
    with eval_mode(model):
        p = model(context_a.reshape(1, -1)).logits[0, -1].float().softmax(-1)
        q = model(context_b.reshape(1, -1)).logits[0, -1].float().softmax(-1)
    return float(0.5 * (p - q).abs().sum())
