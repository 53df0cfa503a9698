"""A compute budget instead of a step count: ``budget.flops=C`` trains the steps that C FLOPs buy for this model.

Why: an isoFLOP sweep (Hoffmann et al. 2022, "Chinchilla", Approach 2) sets every size against the same compute, so
a smaller model sees more tokens. Writing each job's ``trainer.max_steps`` by hand would need each model's FLOPs
per token, which depends on the tokenizer's vocabulary, known only once the data is prepared; here it is computed
where the run knows it, with the count the MFU already uses (``flops_per_token``: 6 per weight plus attention's
12·L·T·D, tinygpt/model/gpt.py), and the tokens per step (the batch's windows × context length × devices ×
gradient accumulation). The steps are the budget over the FLOPs a step costs, rounded down (a run never spends
more than its budget), so two sizes at one budget train step counts in the inverse ratio of their FLOPs per token,
to within one step. The run records what it spent (N, D, C) in run.json's ``budget``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from tinygpt.common.errors import ConfigError, require

# RunConfig (tinygpt/train/schema.py) holds a BudgetConfig, so this file names it in words, not by an import
RunConfig = Any


@dataclass
class BudgetConfig:
    flops: float | None = None  # the run's training compute; null: trainer.max_steps as written

    def __post_init__(self) -> None:
        require(
            self.flops is None or (math.isfinite(self.flops) and self.flops > 0),
            "budget.flops",
            self.flops,
            "a positive number of FLOPs (e.g. budget.flops=3e13) or null",
        )


def tokens_per_step(run: RunConfig) -> int:
    """The tokens one optimizer step trains on: windows per batch × context length × devices × accumulation."""
    trainer = run.trainer
    devices = trainer.get("devices", 1)
    devices = devices if isinstance(devices, int) and devices > 0 else 1  # "auto" and lists: one device per job
    accumulate = trainer.get("accumulate_grad_batches", 1) or 1
    return run.data.batch_size * run.model.context_length * devices * trainer.get("num_nodes", 1) * accumulate


def spend(run: RunConfig, vocab_size: int) -> tuple[RunConfig, dict[str, Any] | None]:
    """``run`` with trainer.max_steps set from ``budget.flops``, and run.json's record of the budget; ``run`` as it
    is and None without one. Refuses, in one line, a budget smaller than one step and a model without a FLOPs
    count."""
    flops = run.budget.flops
    if flops is None:
        return run, None
    from tinygpt.model import GPTConfig, build_on_meta, parameter_breakdown  # the budget's only use of the model

    if not isinstance(run.model, GPTConfig):
        raise ConfigError(f"budget.flops={flops:g}: model.family={run.model.family} has no FLOPs count; use a GPT")
    # the vocabulary from the tokenizer, as the module fills it (tinygpt/train/module.py's model_config)
    model = build_on_meta(run.model if run.model.vocab_size else replace(run.model, vocab_size=vocab_size))
    per_token = model.flops_per_token()
    tokens = tokens_per_step(run)
    per_step = per_token * tokens
    steps = math.floor(flops / per_step)
    if steps < 1:
        raise ConfigError(
            f"budget.flops={flops:g} buys less than one step: a step of this model costs {per_step:.3g} FLOPs "
            f"({per_token:,} per token x {tokens:,} tokens); raise budget.flops or make the model or batch smaller"
        )
    counts = parameter_breakdown(model)
    non_embedding = counts["total"] - counts["embedding"] - counts["position"] - counts["output head"]
    record = {
        "flops": flops,  # as asked
        "flops_per_token": per_token,
        "tokens_per_step": tokens,
        "steps": steps,
        "parameters": counts["total"],  # N as the FLOPs count reads it
        "non_embedding_parameters": non_embedding,  # N as Kaplan et al. count it
        "tokens": steps * tokens,  # D
        "flops_spent": steps * per_step,  # C = FLOPs per token x D
    }
    return replace(run, trainer={**run.trainer, "max_steps": steps}), record
