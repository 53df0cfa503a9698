"""The GPT, top down: its config (every architecture switch of the spec), the model, the block, attention and its KV
cache, the MLPs and the norms, with the registries ``model.mlp`` and ``model.norm`` name. Positions have their own
file (tinygpt/model/position.py); how the modules compute (dropout masks, attention cores, fused projections) is
chosen by name from tinygpt/model/kernels.py through ``SpeedConfig`` (tinygpt/model/speed.py).

One file, as nanoGPT's and litgpt's models are: a block reads from the top down, without a walk through a file a
sublayer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from tinygpt.common.errors import ConfigError, require
from tinygpt.model.kernels import CORES, Dropout
from tinygpt.model.mup import PARAMETRIZATIONS, attention_scale, base_config, multipliers
from tinygpt.model.position import POSITIONS, apply_rope
from tinygpt.model.speed import DEFAULT, SpeedConfig

# --------------------------------------------------------------------------------------------------------------------
# The model's typed configuration: every architecture switch of the spec, validated at construction.
#
# The dataclass uses only int / optional int / float / str / bool fields so that it is itself the Hydra schema of
# the `model` group (tinygpt/model/schema.py): a `model` node merged onto it rejects unknown keys and wrong types,
# and ``OmegaConf.to_object`` turns the composed node into this class (tinygpt/common/typed.py).
# --------------------------------------------------------------------------------------------------------------------


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
    norm: str = "rmsnorm"  # a name in NORMS (below): layernorm | rmsnorm
    norm_eps: float = 1e-5
    prenorm: bool = True  # False: the 2017 post-norm layout (add, then normalize)
    residual: bool = True  # False: each sublayer replaces the stream (003's collapse experiment)
    mlp: str = "swiglu"  # a name in MLPS (below): gelu (tanh) | gelu_exact | swiglu | moe
    mlp_hidden: int | None = None  # None = 4*d_model for the GELUs, int(8*d_model/3) for swiglu and moe experts
    n_experts: int = 8
    top_k: int = 2
    moe_aux_loss_weight: float = 0.01
    qk_norm: bool = False  # RMSNorm of each head's query and key before the dot product (Qwen3)
    bias: bool = False  # biases in every linear layer (q/k/v included) and LayerNorm, GPT-2 style
    tie_embeddings: bool = True  # the output head reuses the embedding table
    dropout: float = 0.0
    init_std: float = 0.02
    parametrization: str = "sp"  # sp | mup (μP: tinygpt/model/mup.py)
    mup_base_width: int | None = None  # under mup: the d_model at which μP equals sp (the width multiplier's base)

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
        _require(
            self.parametrization in PARAMETRIZATIONS,
            "parametrization",
            self.parametrization,
            "one of " + ", ".join(PARAMETRIZATIONS),
        )
        if self.parametrization == "mup":
            _require(
                self.mup_base_width is not None and self.mup_base_width > 0,
                "mup_base_width",
                self.mup_base_width,
                "a positive integer under parametrization=mup: the d_model at which μP equals sp, e.g. 64",
            )
            base_config(self)  # the base-width twin must be a valid model (refused in one line otherwise)

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

    def build(self, speed: SpeedConfig = DEFAULT) -> GPT:
        """The GPT this config describes, computing as ``speed`` says (never what it holds)."""
        return GPT(self, speed)


def _require(ok: bool, field: str, value: Any, allowed: str) -> None:
    require(ok, f"GPTConfig.{field}", value, allowed)  # the one value check (tinygpt/common/errors.py)


# --------------------------------------------------------------------------------------------------------------------
# The GPT: token embedding, optional position table, L blocks, a final norm and the (tied) unembedding.
# --------------------------------------------------------------------------------------------------------------------


class GPTOutput(NamedTuple):
    logits: torch.Tensor  # (B, T, vocab_size)
    aux_loss: torch.Tensor  # 0-dim: weighted MoE load-balancing loss, summed over layers; 0 for dense models


class GPT(nn.Module):
    def __init__(self, config: GPTConfig, speed: SpeedConfig = DEFAULT):
        """speed: how its modules compute (tinygpt/model/speed.py), never what they hold."""
        super().__init__()
        if config.vocab_size <= 0:
            raise ConfigError(
                f"GPTConfig.vocab_size={config.vocab_size} is not allowed when building a model: must be the "
                "tokenizer's vocabulary size (a positive integer), e.g. model.vocab_size=148"
            )
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        # the encoding model.position names (tinygpt/model/position.py); only the learned table has parameters,
        # saved as position_embedding.table.weight
        self.position_embedding = POSITIONS[config.position](config)
        self.blocks = nn.ModuleList(Block(config, i, speed) for i in range(config.n_layers))
        self.final_norm = make_norm(config.norm, config.d_model, config.norm_eps, config.bias)
        # what training steps call: the trunk, whose blocks run compiled under speed.compile (Block)
        self.train_features = self.features
        # Tied: the unembedding is the embedding table, transposed (Press and Wolf, 2017); never a bias.
        self.lm_head = None
        if not config.tie_embeddings:
            self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        # μP's multipliers against the base-width twin (tinygpt/model/mup.py); none under sp. Decided here: the
        # hidden matrices' init, the attention scale, the logits' multiplier, and lr_multipliers, which the
        # optimizer's groups read (tinygpt/train/optim.py)
        self.mup = multipliers(config, self)
        self.lr_multipliers = self.mup.lr
        # the head's input multiplier (μP's logits × base/d_model); None under sp, so nothing is computed
        self.output_multiplier = None if self.mup.output == 1.0 else self.mup.output
        stds = {
            module: self.mup.init_std[name + ".weight"]
            for name, module in self.named_modules()
            if name + ".weight" in self.mup.init_std
        }
        self.apply(lambda module: self._init_weights(module, stds.get(module, config.init_std)))

    def _init_weights(self, module: nn.Module, std: float) -> None:
        # Every weight at N(0, init_std), without GPT-2's extra scaling of the residual projections (003); under μP
        # the hidden matrices at their own std (init_std · √(base fan_in / fan_in)).
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, NORM_TYPES):
            nn.init.ones_(module.weight)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None) -> GPTOutput:
        """idx: (B, T) token ids. With a cache, idx holds only the new tokens; they continue its positions."""
        x, aux = self.features(idx, cache)
        return GPTOutput(F.linear(x, self.head_weight), aux)

    @property
    def head_weight(self) -> torch.Tensor:
        """The unembedding matrix (V, d): the head's weight, or the embedding table when tied."""
        return self.lm_head.weight if self.lm_head is not None else self.token_embedding.weight

    @property
    def has_aux_loss(self) -> bool:
        """Whether features() can return a non-zero auxiliary loss (an MLP with one, e.g. a mixture of experts)."""
        return any(block.mlp.has_aux_loss for block in self.blocks)

    # no GPT head has a bias (tied or not); the LSTM's has one. Every family offers both (module.py reads them)
    head_bias = None

    def features(self, idx: torch.Tensor, cache: KVCache | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The head's input (B, T, d): the final norm's output, times μP's output multiplier under mup; and the MoE
        loss: everything but the head, so that a loss can be fused with the head (tinygpt/model/kernels.py)
        without materialising the logits."""
        B, T = idx.shape
        start = 0 if cache is None else cache.position
        if cache is not None:
            cache.begin(T, B)
        elif T > self.config.context_length:
            limit = self.config.context_length
            raise ConfigError(f"input of {T} tokens is longer than context_length={limit}")
        x = self.token_embedding(idx)
        positions = self.position_embedding
        table = positions.embeddings(start, T, idx.device)
        if table is not None:
            x = x + table
        rope = positions.rotary(start, T)
        # with a cache, attention runs over the cache's whole fixed-length buffer of keys
        attn_bias = positions.attention_bias(start, T, T if cache is None else cache.context_length)
        aux_losses = []
        for block in self.blocks:
            x, aux_loss = block(x, rope, cache, attn_bias)
            if aux_loss is not None:
                aux_losses.append(aux_loss)
        if cache is not None:
            cache.advance(T)
        x = self.final_norm(x)
        if self.output_multiplier is not None:  # μP: the logits × base/d_model, taken on the head's input
            x = x * self.output_multiplier
        if aux_losses:
            aux = self.config.moe_aux_loss_weight * torch.stack(aux_losses).sum()
        else:
            aux = x.new_zeros(())
        return x, aux

    def num_parameters(self) -> int:
        """Every trainable number, the tied embedding counted once."""
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self) -> int:
        """Training FLOPs per token, 003's and PaLM's count: 6 per weight (forward and backward), plus 12·L·T·D for
        attention's own scores and weighted sums."""
        c = self.config
        return 6 * self.num_parameters() + 12 * c.n_layers * c.context_length * c.d_model


# --------------------------------------------------------------------------------------------------------------------
# The transformer block: attention and an MLP, each read through a norm and merged into the stream.
# --------------------------------------------------------------------------------------------------------------------


def to_autocast_dtype(x: torch.Tensor) -> torch.Tensor:
    """A sublayer's input in autocast's dtype when autocast is on (x itself otherwise): cast once here.

    Why: the residual stream and the norms stay in fp32 under bf16-mixed, and autocast casts a Linear's input
    at each Linear. A sublayer reads its input with several (q, k and v; SwiGLU's gate and up), so the same
    (B, T, d) activation was cast three or two times forward, and in backward each cast's bf16 gradient was
    cast back to fp32 before they were summed (the "autocast copies" a bf16 profile shows). Casting
    once gives the Linears the very values they would have cast themselves, so the forward is unchanged to
    the bit; in backward the sublayer's input gradients are summed in bf16 before one cast, as they already
    were with fused projections (tests/test_speedups.py).
    """
    device = x.device.type
    if torch.is_autocast_enabled(device) and x.is_floating_point():
        return x.to(torch.get_autocast_dtype(device))
    return x


class Block(nn.Module):
    def __init__(self, config: GPTConfig, layer_index: int, speed: SpeedConfig = DEFAULT):
        super().__init__()
        # speed.compile: `step` compiled, which training calls in place of the eager one; validation, evaluation
        # and generation (eval mode, no gradient, or a KV cache) stay eager, so they never compile graphs of their
        # own. Every block compiles the same code with its parameters as inputs, so the layers share one graph
        # (regional compilation: one block's cold start, not the trunk's); torch.compile is lazy, so nothing is
        # built before the first training step. None: eager everywhere.
        self.compiled: Callable | None = torch.compile(self.step) if speed.compile else None
        self.prenorm, self.residual = config.prenorm, config.residual
        self.norm1 = make_norm(config.norm, config.d_model, config.norm_eps, config.bias)
        self.attention = CausalSelfAttention(config, layer_index, speed)
        self.norm2 = make_norm(config.norm, config.d_model, config.norm_eps, config.bias)
        self.mlp = make_mlp(config, speed)
        # on each sublayer's output, before it reaches the stream
        self.drop = Dropout(config.dropout, speed.dropout)

    def forward(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
        cache: KVCache | None = None,
        attn_bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The new stream, and the MLP's auxiliary loss (None unless it has one: a mixture of experts).

        rope and attn_bias come from the position encoding (tinygpt/model/position.py), each None if unused."""
        if self.compiled is not None and self.training and cache is None and torch.is_grad_enabled():
            return self.compiled(x, rope, None, attn_bias)
        return self.step(x, rope, cache, attn_bias)

    def step(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
        cache: KVCache | None = None,
        attn_bias: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """forward's computation, always eager (what speed.compile compiles)."""
        if not self.prenorm:  # the 2017 layout: add, then normalize
            x = self.norm1(self.merge(x, self.drop(self.attention(to_autocast_dtype(x), rope, cache, attn_bias))))
            y, aux_loss = self.mlp(to_autocast_dtype(x))
            return self.norm2(self.merge(x, self.drop(y))), aux_loss
        x = self.merge(x, self.drop(self.attention(to_autocast_dtype(self.norm1(x)), rope, cache, attn_bias)))
        y, aux_loss = self.mlp(to_autocast_dtype(self.norm2(x)))
        return self.merge(x, self.drop(y)), aux_loss

    def merge(self, stream: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        """Add a sublayer's output to the residual stream, or (residual=False) replace the stream by it."""
        return stream + update if self.residual else update


# --------------------------------------------------------------------------------------------------------------------
# Causal self-attention with grouped-query heads, optional QK-norm, RoPE and a KV cache.
# --------------------------------------------------------------------------------------------------------------------


class CausalSelfAttention(nn.Module):
    """n_heads query heads share n_kv_heads key/value heads (n_kv_heads = n_heads: plain multi-head).

    What attention is lives here: the q, k, v projections, QK-norm, RoPE, the causal mask or ALiBi's bias, the KV
    cache of generation. How its core computes is the core it builds from ``speed`` (the model's share of
    the speed.* switches, tinygpt/model/speed.py; none is saved in checkpoints): ``speed.attention``
    names a core in tinygpt/model/kernels.py's CORES, which also owns the dropout masks and the core's dtype.

    ``speed.projections=fused``: q, k and v come from one matmul against the three weights concatenated per
    forward, as litgpt's fused QKV does, while the parameters stay three Linears (names, checkpoints and the HF
    exporter unchanged); the same numbers up to float rounding.
    """

    def __init__(self, config: GPTConfig, layer_index: int, speed: SpeedConfig = DEFAULT):
        super().__init__()
        self.core = CORES[speed.attention](speed.dropout, speed.attention_dtype)
        self.project = self._fused_projections if speed.fused else self._projections
        self.layer_index = layer_index  # which of the KV cache's per-layer buffers is this layer's
        self.n_heads, self.n_kv_heads = config.n_heads, config.resolved_kv_heads
        self.head_dim = config.resolved_head_dim
        self.dropout = config.dropout
        # μP's scale of the scores (tinygpt/model/mup.py), handed to the core only when there is one, so a core of
        # one's own written for (q, k, v, mask, dropout_p) keeps working under sp
        scale = attention_scale(config)
        self.scale, self.core_options = scale, ({} if scale is None else {"scale": scale})
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
                q, k, v, attn_mask=cache.mask, enable_gqa=self.n_kv_heads != self.n_heads, scale=self.scale
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
            dropout_p = self.dropout if self.training else 0.0
            y = self.core(q, self._repeat_kv(k), self._repeat_kv(v), mask, dropout_p, **self.core_options)
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


# --------------------------------------------------------------------------------------------------------------------
# The KV cache (000, "Not recomputing the past"): each layer's keys and values, kept between steps.
#
# The buffers are allocated once at the full context length, so every step hands attention tensors of the same
# shape (the spec's GPU run slowed down as the cache grew by one position per step). Keys and values are stored
# before the grouped-query repeat, which is where GQA's memory saving comes from.
# --------------------------------------------------------------------------------------------------------------------


class KVCache:
    """Preallocated keys and values for every layer, each (batch, n_kv_heads, context_length, head_dim).

    `position` is how many positions are already stored. A forward pass with a cache calls `begin(n)`,
    each layer calls `store(layer, k, v)`, and the model calls `advance(n)` once all layers are done.
    """

    def __init__(
        self,
        config: GPTConfig,
        batch_size: int,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ):
        shape = (batch_size, config.resolved_kv_heads, config.context_length, config.resolved_head_dim)
        self.batch_size = batch_size
        self.context_length = config.context_length
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layers)]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layers)]
        self.key_positions = torch.arange(config.context_length, device=device)
        self.position = 0
        self.mask: torch.Tensor | None = None  # (n_new, context_length): which stored keys each query sees

    @classmethod
    def for_model(cls, model: torch.nn.Module, batch_size: int) -> KVCache:
        """A cache on the model's device and in its parameters' dtype."""
        weight = next(model.parameters())
        return cls(model.config, batch_size, device=weight.device, dtype=weight.dtype)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)

    def reset(self) -> None:
        """Forget the stored positions; the buffers are reused, so no memory is allocated."""
        self.position = 0
        self.mask = None

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep the stored rows ``rows`` (a beam search's kept beams, each from the row it continues)."""
        self.keys = [k.index_select(0, rows) for k in self.keys]
        self.values = [v.index_select(0, rows) for v in self.values]

    def begin(self, n_new: int, batch_size: int) -> None:
        """Check that n_new more positions fit, and build the attention mask the layers share for them."""
        if batch_size != self.batch_size:
            raise ConfigError(f"KVCache was allocated for batch size {self.batch_size}, got {batch_size}")
        if self.position + n_new > self.context_length:
            total = self.position + n_new
            raise ConfigError(
                f"KV cache is full: {self.position} positions stored + {n_new} new = {total}, "
                f"more than context_length={self.context_length}"
            )
        # Query i sits at position `position + i` and may see every stored key at or before it. Attention runs
        # over the whole preallocated buffer (a static shape); unwritten slots are masked out.
        query_positions = self.position + torch.arange(n_new, device=self.key_positions.device)
        self.mask = self.key_positions[None, :] <= query_positions[:, None]

    def store(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write new keys and values (batch, n_kv_heads, n_new, head_dim) in place; return full buffers."""
        end = self.position + k.shape[2]
        self.keys[layer][:, :, self.position : end] = k
        self.values[layer][:, :, self.position : end] = v
        return self.keys[layer], self.values[layer]

    def advance(self, n_new: int) -> None:
        self.position += n_new


def kv_cache_bytes_per_token(
    config: GPTConfig | None = None,
    *,
    n_layers: int | None = None,
    n_kv_heads: int | None = None,
    head_dim: int | None = None,
    bytes_per_number: int = 4,
) -> int:
    """2 x layers x KV heads x head dim x bytes per number: one key and one value per KV head per layer (000).

    Pass a GPTConfig, explicit sizes, or both (explicit sizes win), e.g. Llama 3 8B in bf16:
    kv_cache_bytes_per_token(n_layers=32, n_kv_heads=8, head_dim=128, bytes_per_number=2) == 128 * 1024.
    """
    if config is not None:
        n_layers = config.n_layers if n_layers is None else n_layers
        n_kv_heads = config.resolved_kv_heads if n_kv_heads is None else n_kv_heads
        head_dim = config.resolved_head_dim if head_dim is None else head_dim
    missing = [
        name
        for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim))
        if value is None
    ]
    if missing:
        raise ConfigError(f"kv_cache_bytes_per_token needs a config or explicit {', '.join(missing)}")
    return 2 * n_layers * n_kv_heads * head_dim * bytes_per_number


# --------------------------------------------------------------------------------------------------------------------
# The feed-forward sublayers, GELU MLPs (GPT-2's tanh form and the exact one), SwiGLU and a mixture of SwiGLU
# experts (000), and MLPS: the registry `model.mlp` names.
#
# Every MLP returns (output, auxiliary loss or None), so the block and the training loop treat a mixture of
# experts like any other MLP; `has_aux_loss` says whether the second item is ever a tensor (it decides whether
# training logs train/moe_aux_loss).
# --------------------------------------------------------------------------------------------------------------------

# model.mlp's two-matrix GELU MLPs and the form each computes (F.gelu's `approximate`). "gelu" is the tanh
# approximation, as GPT-2 (and chapter 4's GELU class) compute it, exported as transformers' "gelu_new";
# "gelu_exact" is x·Φ(x) with the erf, as nanoGPT's nn.GELU(), BERT and GPT-NeoX compute it, transformers'
# "gelu". The two differ by up to 4.7e-4 per activation (at x = ±2.70): a model trained with one is a different
# function under the other, so they are two names, not a tolerance. On CPUs torch's tanh form is also the
# slower kernel (about half the speed of the erf form: docs/benchmarks/train.md).
GELUS: dict[str, str] = {"gelu": "tanh", "gelu_exact": "none"}


class GeluMLP(nn.Module):
    """Expand, GELU, project back: GPT-2's feed-forward network (two matrices).

    approximate: "tanh" or "none" (GELUS' values), passed to F.gelu.
    """

    def __init__(self, d: int, hidden: int, bias: bool = True, approximate: str = "tanh"):
        super().__init__()
        self.fc = nn.Linear(d, hidden, bias=bias)
        self.proj = nn.Linear(hidden, d, bias=bias)
        self.approximate = approximate

    has_aux_loss = False

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
        return self.proj(F.gelu(self.fc(x), approximate=self.approximate)), None


class SwiGLU(nn.Module):
    """down(SiLU(gate(x)) * up(x)) (Shazeer, 2020), three matrices.

    Never has biases, whatever GPTConfig.bias says: 000's SwiGLU is bias-free, and its "+ SwiGLU only"
    count (28,916,736, on a model whose other layers have biases) depends on it.

    `fused` (speed.projections, chosen when built): gate and up as one matmul against their weights concatenated
    per forward; the parameters and their names stay as they are.
    """

    def __init__(self, d: int, hidden: int, fused: bool = False):
        super().__init__()
        self.fused = fused
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    has_aux_loss = False

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
        if self.fused:
            gate, up = F.linear(x, torch.cat([self.gate.weight, self.up.weight])).chunk(2, dim=-1)
        else:
            gate, up = self.gate(x), self.up(x)
        return self.down(F.silu(gate) * up), None


def route(router_logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each token's top_k experts and their weights, a softmax over just the chosen scores.

    router_logits: (tokens, n_experts). Returns weights and expert indices, each (tokens, top_k).
    Scores [2.0, -1.0, 0.5, 1.5] with top_k=2 give experts [0, 3] with weights [0.62, 0.38].
    """
    scores, chosen = router_logits.topk(top_k, dim=-1)
    return torch.softmax(scores, dim=-1), chosen


def load_balancing_loss(router_logits: torch.Tensor, chosen: torch.Tensor, n_experts: int) -> torch.Tensor:
    """Switch Transformer's auxiliary loss, n_experts * sum_i f_i * P_i.

    f_i is the fraction of routing assignments that went to expert i (tokens x top_k of them, so the f_i
    sum to 1) and P_i the mean router probability of expert i. It is 1 when routing is uniform and grows
    to n_experts when everything goes to one expert. Only P carries a gradient; f comes from a top-k.
    """
    probs = torch.softmax(router_logits.float(), dim=-1)
    assigned = F.one_hot(chosen, n_experts).float()  # (tokens, top_k, n_experts)
    fraction = assigned.sum(dim=(0, 1)) / chosen.numel()
    return n_experts * (fraction * probs.mean(dim=0)).sum()


class MoE(nn.Module):
    """A router picks top_k of n_experts SwiGLU networks per token and mixes their outputs (000)."""

    def __init__(self, d: int, hidden: int, n_experts: int, top_k: int, fused: bool = False):
        super().__init__()
        self.router = nn.Linear(d, n_experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(d, hidden, fused) for _ in range(n_experts))
        self.top_k = top_k

    has_aux_loss = True

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x: (..., d). Returns the mixed output, shaped like x, and the load-balancing loss (unweighted)."""
        flat = x.reshape(-1, x.shape[-1])
        router_logits = self.router(flat)
        weights, chosen = route(router_logits, self.top_k)
        # The weighted sum in fp32 under autocast: the input arrives there in bf16 (cast once by the block,
        # tinygpt/model/gpt.py), and the sum is taken as it was when autocast left the input in fp32.
        dtype = torch.float32 if torch.is_autocast_enabled(x.device.type) else flat.dtype
        out = torch.zeros(flat.shape, dtype=dtype, device=flat.device)
        # Dispatch by expert: each expert runs once, on all the tokens that chose it (in either slot).
        for e, expert in enumerate(self.experts):
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            contribution = weights[rows, slot, None].to(dtype) * expert(flat[rows])[0]
            out = out.index_add(0, rows, contribution)
        return out.view_as(x), load_balancing_loss(router_logits, chosen, len(self.experts))


# model.mlp's names and their builders (config, speed) -> module: GPTConfig checks against the keys, the
# block builds from the values. The speed says how it computes (speed.projections: .fused).
MLPS: dict[str, Callable[[GPTConfig, SpeedConfig], nn.Module]] = {
    **{
        name: (lambda c, i, form=form: GeluMLP(c.d_model, c.resolved_mlp_hidden, bias=c.bias, approximate=form))
        for name, form in GELUS.items()
    },
    "swiglu": lambda c, i: SwiGLU(c.d_model, c.resolved_mlp_hidden, i.fused),
    "moe": lambda c, i: MoE(c.d_model, c.resolved_mlp_hidden, c.n_experts, c.top_k, i.fused),
}


def make_mlp(config: GPTConfig, speed: SpeedConfig = DEFAULT) -> nn.Module:
    if config.mlp not in MLPS:
        raise ConfigError(f"mlp={config.mlp!r} is not allowed: must be one of {', '.join(MLPS)}")
    return MLPS[config.mlp](config, speed)


# --------------------------------------------------------------------------------------------------------------------
# The norms (000, "Normalizing without the mean"), and NORMS: the registry `model.norm` names.
#
# Layer norm is torch's own `nn.LayerNorm` (its `bias=False` gives GPT-2-without-biases' shift-free norm; the
# parameter names, weight and bias, are what checkpoints have always held). RMSNorm is written here: torch's
# `nn.RMSNorm` computes the statistic in the input's dtype, and ours takes it in float32 for bf16 runs. Its
# backward is written out too (`_RMSNormFunction`): autograd's record of the formula made about 12 passes over
# the (tokens, d) activations in backward and saved three of them; the written-out one makes 6 and saves only
# the input (docs/benchmarks/train.md).
# --------------------------------------------------------------------------------------------------------------------


class _RMSNormFunction(torch.autograd.Function):
    """y = w · x̂ with x̂ = x · r, r = 1/√(mean(x²) + ε) per row, and its gradient written out:

        ∂w = Σ_rows g · x̂ = (g ⊙ x)ᵀ r                     (one product pass, one matrix-vector product)
        ∂x = r · (g ⊙ w) − x · r³ · ((g ⊙ x) w) / d         (the row dot products from the same g ⊙ x)

    so backward reads g and x and writes (g ⊙ x), (g ⊙ w) in place into ∂x, and nothing else of their size.
    Rows are the last dimension's vectors; x arrives as (rows, d). The statistic and the gradient are fp32
    whatever x's dtype (x̂ is rounded to x's dtype before the gain, as the formula was written); ∂x is
    rounded back to x's dtype. Not differentiable twice (nothing here needs it)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        x32 = x.float()
        # ‖x‖² / d from one reading pass (vector_norm keeps no squared copy), then the (rows, 1) factor
        r = torch.linalg.vector_norm(x32, dim=-1, keepdim=True).square_().div_(x.shape[-1]).add_(eps).rsqrt_()
        ctx.save_for_backward(x, weight, r)
        normed = x32 * r
        if x.dtype != torch.float32:
            return weight * normed.to(x.dtype)
        return normed.mul_(weight) if weight.dtype == normed.dtype else weight * normed

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor):
        x, weight, r = ctx.saved_tensors
        x32, g = x.float(), grad.float()
        w = weight.float()
        gx = g * x32
        grad_w = None
        if ctx.needs_input_grad[1] and x.dtype != torch.float32:  # the gain multiplied x̂ rounded to x's dtype
            grad_w = (g * (x32 * r).to(x.dtype)).sum(0, dtype=torch.float32).to(weight.dtype)
        elif ctx.needs_input_grad[1]:
            grad_w = (gx.T @ r).squeeze(-1).to(weight.dtype)
        grad_x = None
        if ctx.needs_input_grad[0]:
            coef = (gx @ w).unsqueeze_(-1).mul_(r.pow(3)).div_(-x.shape[-1])
            grad_x = (g * w).mul_(r).addcmul_(x32, coef).to(x.dtype)
        return grad_x, grad_w, None


class RMSNorm(nn.Module):
    """Divide by the root mean square and scale; no mean subtracted, no shift (Zhang and Sennrich, 2019)."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # The mean of squares is taken in float32 so that bf16/fp16 activations don't lose the statistic.
        rows = x.reshape(-1, x.shape[-1])
        return _RMSNormFunction.apply(rows, self.weight, self.eps).view(x.shape)


# model.norm's names and their builders (d, eps, bias): `bias` only affects layer norm, since RMSNorm has no
# shift by definition. GPTConfig checks against the keys; make_norm builds from the values.
NORMS: dict[str, Callable[[int, float, bool], nn.Module]] = {
    "layernorm": lambda d, eps, bias: nn.LayerNorm(d, eps, bias=bias),
    "rmsnorm": lambda d, eps, bias: RMSNorm(d, eps),
}
NORM_TYPES = (nn.LayerNorm, RMSNorm)  # what a norm module is: their gains count as "norms", start at 1


def make_norm(kind: str, d: int, eps: float, bias: bool) -> nn.Module:
    """The configured norm."""
    if kind not in NORMS:
        raise ConfigError(f"norm={kind!r} is not allowed: must be one of {', '.join(NORMS)}")
    return NORMS[kind](d, eps, bias)
