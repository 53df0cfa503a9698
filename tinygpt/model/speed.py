"""The speed switches (`speed.*` in conf/train.yaml), each once: their names, allowed values and defaults.

``SpeedConfig`` is the `speed` node's schema and the one object a model is built with (``GPT(config, speed)``): the
model's modules read their share (attention, attention_dtype, dropout, projections, compile) when they are built,
and training reads the rest (loss, optimizer, malloc, tf32). None of them changes a parameter, its name or a
checkpoint, and nothing is set on a built model afterwards. ``DEFAULT`` is what an inference-only user gets
(``tinygpt.api.load``, evaluate, generate, export). What ``auto`` means on a device is decided once per run, before
the model is built, by tinygpt/train/device_settings.py.

Each default was chosen by whole-step timings on CPUs; the figures, machines and rounds are in
docs/benchmarks/train.md, not here.

Each switch changes how a step is computed, never what it computes beyond a stated tolerance
(tests/test_speedups.py compares each with the plain path):
- `loss`: "chunked" fuses the head with the cross-entropy over chunks of tokens, so the B×T×V logits are
  never materialised (tinygpt/model/kernels.py); "full" is `F.cross_entropy` over the full logits.
  Loss and gradients agree to float rounding (fp32: 1e-5 relative; bf16 autocast: bf16 rounding).
- `loss_chunk`: tokens per chunk for "chunked"; null picks one from the head's shape (fused_loss.auto_chunk).
- `attention`: how attention dropout is computed while training with dropout > 0 (model/kernels.py):
  "sdpa" inside `scaled_dot_product_attention`, "explicit" as softmax weights dropped by F.dropout. The same
  distribution (a Bernoulli(1 - p) mask and 1/(1 - p) scaling), different random draws. Both cost several
  times attention itself on a CPU, where sdpa measured faster in whole steps, so it is the default. It picks
  between torch's masks only: with `dropout` int16 (auto on a CPU) attention dropout always takes the written-out
  softmax.
- `attention_dtype`: the attention core's dtype under bf16/fp16 autocast (model/kernels.py): "compute"
  (autocast's), "float32" (q, k, v cast up, autocast off, the output cast back), "auto" (the default): fp32 for
  SDPA on a CPU, whose bf16 kernels are slower than its fp32 ones, and the compute dtype for the written-out
  softmax of attention dropout (slower in fp32) and on other devices. More exact, not less: within bf16 rounding
  (tested).
- `dropout`: where dropout masks come from (model/kernels.py): "torch" (F.dropout, or SDPA's own under
  attention=sdpa), or "int16", two masks' worth of 16-bit draws per random 32-bit word, the drop probability
  rounded to a multiple of 1/65,536 and the scale 1/(1 - that), so every expectation is kept; attention dropout
  then goes through the written-out softmax, with the scale applied to its (B, H, T, head) output. "auto" (the
  default) is int16 on a CPU, where whole steps with dropout measured faster than with torch's masks, and torch's
  on other devices (one fused CUDA kernel; not measured here).
- `projections`: "fused" computes attention's q, k, v as one matmul and SwiGLU's gate and up as one, against
  the weights concatenated per forward (the parameters stay separate Linears: names and checkpoints unchanged);
  "separate" is one matmul per Linear. Loss and gradients agree to float rounding (tested, fp32 and bf16).
- `compile`: `torch.compile` for training steps, chosen when the model is built, by region: a GPT's
  transformer block is compiled once and that one graph serves every layer (regional compilation: the blocks
  share their code and take their parameters as inputs), so the cold start is one block's, not the whole
  trunk's; a family without blocks (the LSTM) has its trunk compiled whole. Validation, evaluation and
  generation stay eager. On a CPU it pays a cold start of seconds and gains only on the Llama layout without
  dropout; on LayerNorm/GELU layouts and with dropout it is no faster, so it is off by default.
- `optimizer`: AdamW's implementation, "fused" (one kernel over all parameters; CPU and CUDA), "foreach"
  (batched tensor ops) or "for_loop" (torch's CPU default); the same update up to float rounding.
- `malloc`: "keep" raises glibc's mmap and trim thresholds so freed tensors stay in the heap for the next step
  instead of being unmapped and faulted in again (tinygpt/train/device_settings.py); "system" leaves glibc as it is;
  "auto" (the default) is keep where the C library is glibc. Nothing computed changes (bit-identical, tested);
  it helps steps that free and reallocate large tensors (since_gpt2's). Per process, applied when the GPTModule
  is built.
- `tf32`: CUDA only: float32 matmuls on TF32 tensor cores (true) or in IEEE float32 (false, PyTorch's default).
- `peak_flops`: not a switch but the MFU's denominator (FLOP/s in the run's precision; null: measured by the run).

``SpeedConfig`` is the `speed` node's schema itself (a field of the run's ``RunConfig``, stored in Hydra's
ConfigStore): a misspelled key or a wrong type fails at composition, a bad value in ``__post_init__``.

What each switch resolves to on a CUDA GPU or Apple's GPU, and which do nothing there, is decided once per run by
tinygpt/train/device_settings.py and stated in the run's first lines.

Defaults are chosen by measurement on the project's 2-core CPU: quiet A/B runs for `attention`, `projections`,
`compile` and `malloc`, rough ones under load for `optimizer` (docs/benchmarks/train.md says how, and how to re-measure
with `scripts/bench_train.py --ab`). None of them changes parameter names or checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinygpt.common.errors import require
from tinygpt.model.kernels import CORES, DROPOUT_IMPLS

ATTENTION_DTYPES = ("auto", "float32", "compute")
PROJECTIONS = ("fused", "separate")
MALLOC_IMPLS = ("auto", "keep", "system")  # glibc's thresholds: tinygpt/train/device_settings.py

CHOICES = {
    "loss": ("chunked", "full"),
    "attention": CORES,
    "attention_dtype": ATTENTION_DTYPES,
    "dropout": DROPOUT_IMPLS,
    "projections": PROJECTIONS,
    "optimizer": ("fused", "foreach", "for_loop"),
    "malloc": MALLOC_IMPLS,
}


@dataclass
class SpeedConfig:
    loss: str = "chunked"
    loss_chunk: int | None = None
    attention: str = "sdpa"
    attention_dtype: str = "auto"
    dropout: str = "auto"
    projections: str = "separate"
    compile: bool = False
    optimizer: str = "fused"
    malloc: str = "auto"
    tf32: bool = False
    # MFU's denominator, FLOP/s in the run's trainer.precision (tinygpt/train/peak.py); None: measured by the run
    peak_flops: float | None = None

    def __post_init__(self) -> None:
        for name, allowed in CHOICES.items():
            require(
                getattr(self, name) in allowed, f"speed.{name}", getattr(self, name), "one of " + ", ".join(allowed)
            )
        require(
            self.loss_chunk is None or (isinstance(self.loss_chunk, int) and self.loss_chunk > 0),
            "speed.loss_chunk",
            self.loss_chunk,
            "a positive number of tokens, or null for automatic",
        )
        for name in ("compile", "tf32"):
            require(isinstance(getattr(self, name), bool), f"speed.{name}", getattr(self, name), "true or false")
        require(
            self.peak_flops is None or self.peak_flops > 0,
            "speed.peak_flops",
            self.peak_flops,
            "a positive FLOP/s, or null",
        )

    @property
    def fused(self) -> bool:
        """Attention's q, k, v and SwiGLU's gate and up as one matmul each (speed.projections=fused)."""
        return self.projections == "fused"


DEFAULT = SpeedConfig()


def optimizer_flags(config: SpeedConfig) -> dict[str, bool]:
    """torch.optim.AdamW's keyword arguments for the chosen implementation."""
    return {"fused": {"fused": True}, "foreach": {"foreach": True}, "for_loop": {"foreach": False}}[config.optimizer]
