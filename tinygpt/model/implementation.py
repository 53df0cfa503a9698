"""How a model's modules compute, chosen when the model is built: attention dropout's path, the attention core's
dtype, the dropout masks, the projections' matmuls and whether training steps run compiled.

These are the model's share of the ``speed.*`` switches (tinygpt/train/speedups.py says what each does and why its
default is what it is): they change how a forward computes, never its parameters, their names or a checkpoint, so
a model is built with them (``GPT(config, implementation)``) and nothing is set on a built model afterwards. The
default is what an inference-only user gets (``tinygpt.api.load``, evaluate, generate, export).
"""

from __future__ import annotations

from dataclasses import dataclass

from tinygpt.common.errors import require
from tinygpt.model.kernels import CORES, DROPOUT_IMPLS

ATTENTION_DTYPES = ("auto", "float32", "compute")
PROJECTIONS = ("fused", "separate")


@dataclass(frozen=True)
class Implementation:
    attention: str = "sdpa"  # attention dropout inside SDPA (sdpa) or through the written-out softmax (explicit)
    attention_dtype: str = "auto"  # the attention core under 16-bit autocast: auto | float32 | compute
    dropout: str = "auto"  # dropout masks: torch's, int16 slices of random words, or auto (by device)
    projections: str = "separate"  # q/k/v and SwiGLU's gate/up: one matmul per Linear, or one for all (fused)
    compile: bool = False  # torch.compile for training steps: each block's step (a GPT), the trunk (the LSTM)

    def __post_init__(self) -> None:
        for name, allowed in (
            ("attention", CORES),
            ("attention_dtype", ATTENTION_DTYPES),
            ("dropout", DROPOUT_IMPLS),
            ("projections", PROJECTIONS),
        ):
            require(
                getattr(self, name) in allowed, f"speed.{name}", getattr(self, name), "one of " + ", ".join(allowed)
            )

    @property
    def fused(self) -> bool:
        return self.projections == "fused"


DEFAULT = Implementation()
