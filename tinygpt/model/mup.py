"""μP, the maximal update parametrization: the per-parameter multipliers that change with width, decided once.

Why: under the standard parametrization (``sp``, every weight at N(0, init_std), one learning rate), a wider model
takes larger updates in its hidden layers and its logits grow with width, so the best learning rate moves as
d_model grows and a search at d_model 128 says little about 1,024. μP (Yang et al., "Tensor Programs V", 2022)
scales each layer so that every activation's coordinates move by Θ(1) per step at any width; then a setting tuned
at a small width holds at a larger one (μTransfer). ``model.parametrization=mup`` turns it on, and
``model.mup_base_width`` names the d_model at which μP *is* the standard parametrization, so a model tuned under
SP at the base width keeps its settings, and widths m = d_model / base times larger inherit them.

For AdamW, as microsoft/mup (``MuReadout``, ``MuAdam``) and EleutherAI's nanoGPT-mup define it:

- hidden matrices (every matrix inside a block: q, k, v, out, the MLPs', a mixture's router and experts): drawn
  with variance ∝ 1/fan_in, i.e. ``init_std · √(base fan_in / fan_in)``, and trained at ``lr · base fan_in /
  fan_in``. fan_in is read from the matrix and from the same matrix of the base-width twin, so a fixed
  ``mlp_hidden`` or ``head_dim`` (whose matrices do not widen) is scaled only where it does widen;
- the embeddings (tokens, a learned position table), norm gains and biases: as at the base width (init_std, lr);
- the output head: as at the base width, and the logits multiplied by base / d_model (the head's input is
  multiplied once, in ``GPT.features``). Tied embeddings need nothing more: the table keeps the embedding's
  init and learning rate, and the multiplier, not the table, shrinks the logits (microsoft/mup's
  ``MuSharedReadout``; the Cerebras guide ties the same way);
- attention: scores scaled by ``√(base head_dim) / head_dim``, 1/head_dim as μP asks, times the constant that
  makes it 1/√head_dim at the base width;
- weight decay: decoupled and independent of width. torch's AdamW shrinks a weight by ``lr · weight_decay`` per
  step; with μP's smaller learning rate for hidden matrices, that product would fall with width, so their groups
  take ``weight_decay · fan_in / base fan_in`` and every matrix decays by ``lr · weight_decay`` per step at every
  width ("independent" weight decay: Wortsman et al. 2023, which μTransfer with AdamW needs in practice: Kosson
  et al. 2025).

The multipliers live in the model (init, the attention scale, the head's input multiplier, ``lr_multipliers``
for the optimizer's groups, tinygpt/train/optim.py) and are decided at construction; under ``sp`` nothing here
runs, so every SP result, checkpoint and parameter count is what it was, bit for bit. Export to transformers
folds the multipliers into the weights (:func:`fold_into_sp`). What does not transfer across width under μP:
depth, batch size and the schedule's length (docs/mup.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Protocol

import torch
from torch import nn

from tinygpt.common.errors import ConfigError

PARAMETRIZATIONS = ("sp", "mup")  # model.parametrization's names


class GPTConfig(Protocol):
    """What μP reads of the model's config (tinygpt/model/gpt.py's GPTConfig, a dataclass, which calls this file:
    so the fields are named here rather than the class imported)."""

    parametrization: str
    mup_base_width: int | None
    d_model: int
    n_layers: int
    init_std: float
    qk_norm: bool

    @property
    def resolved_head_dim(self) -> int: ...


def base_config(config: GPTConfig) -> GPTConfig:
    """The base-width twin: the same model at d_model = mup_base_width, under the standard parametrization.

    Its shapes are what μP compares each parameter's with; a twin that is not a valid model (a base width that
    n_heads does not divide, an odd RoPE head_dim) is refused in one line naming mup_base_width."""
    base = config.mup_base_width
    try:
        return replace(config, d_model=base, parametrization="sp", mup_base_width=None)
    except ConfigError as err:
        raise ConfigError(
            f"GPTConfig.mup_base_width={base} is not allowed: the model at d_model={base} must itself be valid ({err})"
        ) from None


def is_hidden_matrix(name: str, param: torch.Tensor) -> bool:
    """A matrix inside a block (both of its sides grow with width, or its fan_in does): μP's 'hidden' weights."""
    return name.startswith("blocks.") and param.dim() == 2


@dataclass(frozen=True)
class Multipliers:
    """What μP changes in one model, against its base-width twin; ``none()`` is the standard parametrization."""

    init_std: dict[str, float] = field(default_factory=dict)  # parameter name -> its init std (others: init_std)
    lr: dict[str, float] = field(default_factory=dict)  # parameter name -> its learning-rate multiplier (others 1)
    output: float = 1.0  # the head's input (so the logits) is multiplied by this
    attention_scale: float | None = None  # the scores' scale; None: 1/√head_dim, as SDPA's default

    @classmethod
    def none(cls) -> Multipliers:
        return cls()


def multipliers(config: GPTConfig, model: nn.Module) -> Multipliers:
    """μP's multipliers for ``model`` (built from ``config``), read against its base-width twin built on the meta
    device (shapes only, no memory); the standard parametrization's (none) under ``sp``."""
    if config.parametrization == "sp":
        return Multipliers.none()
    base_cfg = base_config(config)
    with torch.device("meta"):
        twin = type(model)(base_cfg)
    base_shapes = {name: p.shape for name, p in twin.named_parameters()}
    init_std, lr = {}, {}
    for name, param in model.named_parameters():
        if not is_hidden_matrix(name, param):
            continue
        ratio = param.shape[1] / base_shapes[name][1]  # fan_in over the twin's: nn.Linear's weight is (out, in)
        init_std[name] = config.init_std / math.sqrt(ratio)
        lr[name] = 1.0 / ratio
    return Multipliers(
        init_std=init_std, lr=lr, output=config.mup_base_width / config.d_model, attention_scale=attention_scale(config)
    )


def attention_scale(config: GPTConfig) -> float | None:
    """The attention scores' scale: None under sp (SDPA's 1/√head_dim); under μP √(base head_dim) / head_dim, the
    1/head_dim of μP times what makes it 1/√head_dim at the base width."""
    if config.parametrization == "sp":
        return None
    base_head_dim = base_config(config).resolved_head_dim
    if base_head_dim == config.resolved_head_dim:  # at the base width (or a fixed head_dim): SP's, to the bit
        return None
    return math.sqrt(base_head_dim) / config.resolved_head_dim


def fold_into_sp(state: dict[str, torch.Tensor], config: GPTConfig) -> dict[str, torch.Tensor]:
    """A μP model's weights as a standard-parametrization model's that computes the same logits: what export to
    transformers writes (their classes scale attention by 1/√head_dim and have no logit multiplier).

    - the logit multiplier goes into the final norm's gain (and LayerNorm's bias): logits = (s·g ⊙ x̂ + s·b) Wᵀ,
      which works for a tied head too, where scaling the table would also scale the embeddings;
    - the attention scale's ratio to 1/√head_dim goes into the queries: the q projection's weight and bias, or,
      with QK-norm (which would undo a scale before it), the q norm's gain. RoPE rotates, so it commutes.

    The state of an ``sp`` model is returned as it is."""
    if config.parametrization == "sp":
        return state
    output = config.mup_base_width / config.d_model
    scale = attention_scale(config)
    query = 1.0 if scale is None else scale * math.sqrt(config.resolved_head_dim)  # the ratio to 1/√head_dim
    folded = dict(state)
    for name in ("final_norm.weight", "final_norm.bias"):
        if name in folded and output != 1.0:
            folded[name] = folded[name] * output
    for i in range(config.n_layers):
        prefix = f"blocks.{i}.attention."
        names = [prefix + "q_norm.weight"] if config.qk_norm else [prefix + "q_proj.weight", prefix + "q_proj.bias"]
        for name in names:
            if name in folded and query != 1.0:
                folded[name] = folded[name] * query
    return folded
