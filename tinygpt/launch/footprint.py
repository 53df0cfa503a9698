"""How much accelerator memory one training job needs: the estimate that ``sweep.jobs_per_device=auto`` packs by.

A job's peak memory is its training state plus what one step keeps alive for the backward pass:
- state: the float32 weights, their gradients and AdamW's two moments, 16 bytes a parameter; under mixed
  precision also autocast's half-precision copy of the weights, 2 more;
- activations: per layer, what the block saves for backward, counted per token in elements of the compute
  dtype: the pre-norm block keeps about 9 d_model-wide tensors (norm inputs and outputs, q, k, v, attention
  output, residuals, projection inputs) and 3 hidden-wide ones for SwiGLU or the MoE's experts (gate, up, their
  product), 2 for the GELUs; dropout adds a one-byte mask per dropped tensor (3 per layer). Attention dropout
  through the written-out softmax (``speed.dropout=int16`` on a CPU, ``speed.attention=explicit``) also keeps
  the heads x context x context scores, probabilities, dropped probabilities and mask; SDPA's fused kernels keep
  one float per head and token;
- the loss: the logits of one chunk (``speed.loss=chunked``) or of the whole batch (``full``), with their
  softmax, gradient and a matmul's output (4 float32 tensors), and the head's and hidden states' gradients;
- the device's own share, which the model does not decide: a CUDA context with cuBLAS's and Lightning's
  buffers, counted as ``CUDA_CONTEXT`` per process.
The figure counts live tensors, and errs high: tests/test_sweep_packing.py holds it between 1x and 1.5x the peak
a CPU process measures for the same step (the CPU has no context; everything else is the same allocation, made by
the same code). What a device's allocator adds on top
(rounding, fragmentation) is left to the share of free memory that packing divides (tinygpt/launch/packing.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from tinygpt.model import GPTConfig, build_on_meta
from tinygpt.model.kernels import auto_chunk

GIB = 1 << 30
CUDA_CONTEXT = 768 << 20  # a CUDA context, cuBLAS workspaces and the caching allocator's slack, per process
ADAMW_STATE_BYTES = 16  # fp32 weight, gradient, and AdamW's exp_avg and exp_avg_sq, per parameter
WIDE_PER_LAYER = 9  # d_model-wide tensors a block saves for backward (see the module docstring)
DROPOUT_MASKS_PER_LAYER = 3  # attention output, attention weights' output projection, MLP output


@dataclass(frozen=True)
class Footprint:
    parameters: int
    state: int  # bytes
    activations: int
    loss: int
    context: int

    @property
    def total(self) -> int:
        return self.state + self.activations + self.loss + self.context

    def describe(self) -> str:
        return (
            f"{self.total / GIB:.2f} GiB per job ({self.parameters:,} parameters: state {self.state / GIB:.2f}, "
            f"activations {self.activations / GIB:.2f}, loss {self.loss / GIB:.2f}, device context "
            f"{self.context / GIB:.2f} GiB)"
        )


def estimate(
    config: GPTConfig,
    batch_size: int,
    precision: str,
    kind: str,
    loss: str = "chunked",
    loss_chunk: int | None = None,
    written_out_attention: bool = False,
) -> Footprint:
    """The peak memory of one training job of ``config`` at ``batch_size`` x ``config.context_length`` tokens in
    ``precision`` on a device of ``kind`` ("cuda", "mps", "cpu"). ``written_out_attention``: attention dropout
    runs as softmax + dropout on the full scores (see the module docstring); a model without dropout never does."""
    parameters = sum(p.numel() for p in build_on_meta(config).parameters())
    mixed = not precision.startswith("32")
    state = parameters * (ADAMW_STATE_BYTES + (2 if mixed else 0))
    element = 2 if mixed else 4
    tokens = batch_size * config.context_length
    hidden = config.resolved_mlp_hidden
    per_token = WIDE_PER_LAYER * config.d_model + (3 if config.mlp in ("swiglu", "moe") else 2) * hidden
    if config.mlp == "moe":  # each token's hidden-wide tensors in each of its top_k experts
        per_token += 3 * hidden * (config.top_k - 1)
    layer = tokens * per_token * element + tokens * config.n_heads * 4  # + SDPA's logsumexp (fp32, per head)
    if config.dropout > 0:
        layer += tokens * config.d_model * DROPOUT_MASKS_PER_LAYER
        if written_out_attention:  # scores, probabilities and the dropped ones (compute dtype), and the mask
            layer += tokens * config.n_heads * config.context_length * (3 * element + 2)
    activations = config.n_layers * layer + tokens * config.d_model * 4 * 2  # + embeddings and final norm (fp32)
    vocab = config.vocab_size
    rows = tokens if loss == "full" else min(tokens, loss_chunk or auto_chunk(vocab, config.d_model))
    # a chunk's logits, probabilities, their gradient and a matmul's output buffer; the head's gradient and the
    # hidden states' (fp32)
    loss_bytes = 4 * rows * vocab * 4 + (vocab + tokens) * config.d_model * 4
    context = CUDA_CONTEXT if kind == "cuda" else 0
    return Footprint(parameters, state, activations, loss_bytes, context)
