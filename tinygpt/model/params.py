"""Where a model's parameters are, and building a model without allocating it (the meta device)."""

from __future__ import annotations

import torch
from torch import nn

from tinygpt.common.errors import ConfigError
from tinygpt.model.gpt import GPT, NORM_TYPES, GPTConfig

GROUPS = ("embedding", "position", "attention", "mlp", "norms", "output head")


def build_on_meta(config: GPTConfig) -> GPT:
    """The model with shapes but no storage: counting Llama 3 8B's parameters costs no memory."""
    with torch.device("meta"):
        return GPT(config)


def parameter_breakdown(model: GPT) -> dict[str, int]:
    """Parameter counts by group (GROUPS) plus "total"; a tied output head counts 0, its table once.

    Norm gains, QK-norm's included, count as "norms"; the MoE router counts as "mlp".
    """
    counts = dict.fromkeys(GROUPS, 0)
    seen: set[int] = set()
    for module_name, module in model.named_modules():
        for p in module.parameters(recurse=False):
            if id(p) in seen:
                continue
            seen.add(id(p))
            counts[_group_of(module_name, module)] += p.numel()
    counts["total"] = sum(counts[g] for g in GROUPS)
    return counts


def _group_of(module_name: str, module: nn.Module) -> str:
    if isinstance(module, NORM_TYPES):
        return "norms"
    top = module_name.split(".")[0]
    if top == "token_embedding":
        return "embedding"
    if top == "position_embedding":
        return "position"
    if top == "lm_head":
        return "output head"
    if top == "blocks":
        sublayer = module_name.split(".")[2]
        if sublayer in ("attention", "mlp"):
            return sublayer
    # A parameter nobody classified would silently go missing from the breakdown; fail loudly instead.
    raise ConfigError(f"parameter_breakdown does not know where {module_name!r} belongs")


def formula_count(config: GPTConfig) -> int:
    """003's estimate, 12·L·D² + V·D: 4D² of attention and 8D² of MLP per block plus one V×D table."""
    return 12 * config.n_layers * config.d_model**2 + config.vocab_size * config.d_model
