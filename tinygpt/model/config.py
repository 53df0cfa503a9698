"""The model's typed configuration: every architecture switch of the spec, validated at construction.

The dataclass uses only int / optional int / float / str / bool fields so that it is itself the Hydra schema of
the `model` group (tinygpt/model/schema.py): a `model` node merged onto it rejects unknown keys and wrong types,
and ``OmegaConf.to_object`` turns the composed node into this class (tinygpt/common/typed.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinygpt.common.errors import ConfigError
from tinygpt.model.mlp import GELUS, MLPS
from tinygpt.model.norm import NORMS
from tinygpt.model.position import POSITIONS


@dataclass
class GPTConfig:
    vocab_size: int = 0  # 0 = not known yet; filled from the tokenizer before the model is built
    context_length: int = 256
    d_model: int = 192
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int | None = None  # None = n_heads (plain multi-head); 1 = MQA; in between = GQA
    head_dim: int | None = None  # None = d_model // n_heads; may differ, as in Qwen3
    position: str = "rope"  # a name in model/position.py's POSITIONS: rope | learned | none | sinusoidal | alibi
    rope_base: float = 10000.0
    norm: str = "rmsnorm"  # a name in tinygpt/model/norm.py's NORMS: layernorm | rmsnorm
    norm_eps: float = 1e-5
    prenorm: bool = True  # False: the 2017 post-norm layout (add, then normalize)
    residual: bool = True  # False: each sublayer replaces the stream (003's collapse experiment)
    mlp: str = "swiglu"  # a name in tinygpt/model/mlp.py's MLPS: gelu (tanh) | gelu_exact | swiglu | moe
    mlp_hidden: int | None = None  # None = 4*d_model for the GELUs, int(8*d_model/3) for swiglu and moe experts
    n_experts: int = 8
    top_k: int = 2
    moe_aux_loss_weight: float = 0.01
    qk_norm: bool = False  # RMSNorm of each head's query and key before the dot product (Qwen3)
    bias: bool = False  # biases in every linear layer (q/k/v included) and LayerNorm, GPT-2 style
    tie_embeddings: bool = True  # the output head reuses the embedding table
    dropout: float = 0.0
    init_std: float = 0.02

    def __post_init__(self) -> None:
        for name in ("context_length", "d_model", "n_layers", "n_heads", "n_experts", "top_k"):
            _require(getattr(self, name) > 0, name, getattr(self, name), "a positive integer")
        _require(
            self.vocab_size >= 0,
            "vocab_size",
            self.vocab_size,
            "a positive integer (or 0 until the tokenizer fills it in)",
        )
        for name in ("n_kv_heads", "head_dim", "mlp_hidden"):
            value = getattr(self, name)
            _require(value is None or value > 0, name, value, "null or a positive integer")
        for name, allowed in (("position", POSITIONS), ("norm", NORMS), ("mlp", MLPS)):
            value = getattr(self, name)
            _require(value in allowed, name, value, "one of " + ", ".join(allowed))
        if self.head_dim is None:
            _require(
                self.d_model % self.n_heads == 0,
                "n_heads",
                self.n_heads,
                f"a divisor of d_model={self.d_model} when head_dim is unset (or set head_dim)",
            )
        if self.n_kv_heads is not None:
            _require(
                self.n_heads % self.n_kv_heads == 0,
                "n_kv_heads",
                self.n_kv_heads,
                f"a divisor of n_heads={self.n_heads} (each group of query heads shares one KV head)",
            )
        POSITIONS[self.position].check(self)  # what the encoding needs (RoPE: an even head_dim)
        _require(self.top_k <= self.n_experts, "top_k", self.top_k, f"at most n_experts={self.n_experts}")
        _require(0.0 <= self.dropout < 1.0, "dropout", self.dropout, "a probability in [0, 1)")
        for name in ("rope_base", "norm_eps", "init_std"):
            _require(getattr(self, name) > 0, name, getattr(self, name), "a positive number")
        _require(
            self.moe_aux_loss_weight >= 0, "moe_aux_loss_weight", self.moe_aux_loss_weight, "a non-negative number"
        )

    @property
    def resolved_head_dim(self) -> int:
        return self.head_dim if self.head_dim is not None else self.d_model // self.n_heads

    @property
    def resolved_kv_heads(self) -> int:
        return self.n_kv_heads if self.n_kv_heads is not None else self.n_heads

    @property
    def resolved_mlp_hidden(self) -> int:
        if self.mlp_hidden is not None:
            return self.mlp_hidden
        if self.mlp in GELUS:
            return 4 * self.d_model
        # Three matrices at 2/3 of 4*d keep the weight count of the two-matrix GELU MLP; the spec's
        # parameter counts depend on exactly this rounding (int, i.e. floor).
        return int(8 * self.d_model / 3)


def _require(ok: bool, field: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"GPTConfig.{field}={value!r} is not allowed: must be {allowed}")
