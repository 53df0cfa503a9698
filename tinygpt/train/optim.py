"""AdamW with 003's parameter groups: weight decay on matrices (a tied embedding included), none on
norm gains and biases; or, ``optim.decay_on=all``, on every parameter, as ``torch.optim.AdamW(model.parameters())``
does (000 names AdamW and its learning rate only: docs/experiments/since_gpt2.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from tinygpt.common.errors import require
from tinygpt.train.schedules import SCHEDULES, make_lr_lambda

# optim.decay_on: which parameters weight decay applies to
DECAY_GROUPS = {
    "matrices": lambda param: param.dim() >= 2,  # 003: weights and embeddings; not norm gains or biases
    "all": lambda param: True,  # torch.optim.AdamW(model.parameters(), ...): every parameter
}


@dataclass
class OptimConfig:
    lr: float = 1e-3
    betas: list[float] = field(default_factory=lambda: [0.9, 0.95])
    weight_decay: float = 0.1
    warmup_steps: int = 200
    schedule: str = "constant"
    min_lr_ratio: float = 0.1
    decay_fraction: float = 0.2
    grad_clip: float = 1.0
    decay_on: str = "matrices"  # a key of DECAY_GROUPS

    def __post_init__(self) -> None:
        require(self.decay_on in DECAY_GROUPS, "optim.decay_on", self.decay_on, "one of " + ", ".join(DECAY_GROUPS))
        require(self.schedule in SCHEDULES, "optim.schedule", self.schedule, "one of " + ", ".join(SCHEDULES))
        require(self.lr > 0, "optim.lr", self.lr, "a positive number")
        require(
            len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas),
            "optim.betas",
            list(self.betas),
            "two numbers in [0, 1)",
        )
        require(0 <= self.min_lr_ratio <= 1, "optim.min_lr_ratio", self.min_lr_ratio, "in [0, 1]")
        require(self.weight_decay >= 0, "optim.weight_decay", self.weight_decay, "a non-negative number")
        require(self.warmup_steps >= 0, "optim.warmup_steps", self.warmup_steps, "a non-negative integer")
        require(0 <= self.decay_fraction <= 1, "optim.decay_fraction", self.decay_fraction, "in [0, 1]")
        # a negative clip norm flips every gradient: training by gradient ascent
        require(self.grad_clip >= 0, "optim.grad_clip", self.grad_clip, "a non-negative number (0: no clipping)")

    def build(self, model: torch.nn.Module, total_steps: int, implementation: dict | None = None):
        """AdamW over ``model``'s parameters (weight decay on ``decay_on``'s group) and its learning-rate schedule
        over ``total_steps``. implementation: AdamW's fused/foreach flags (speed.optimizer,
        tinygpt/model/speed.py); None: torch's."""
        optimizer = torch.optim.AdamW(
            parameter_groups(model, self.weight_decay, self.decay_on, self.lr),
            lr=self.lr,
            betas=tuple(self.betas),
            **(implementation or {}),
        )
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer,
            make_lr_lambda(
                schedule=self.schedule,
                warmup_steps=self.warmup_steps,
                total_steps=total_steps,
                min_lr_ratio=self.min_lr_ratio,
                decay_fraction=self.decay_fraction,
            ),
        )
        return optimizer, schedule


def parameter_groups(
    model: torch.nn.Module, weight_decay: float, decay_on: str = "matrices", lr: float | None = None
) -> list[dict]:
    """AdamW's groups: [decayed, not decayed] at the optimizer's learning rate, then, under μP, one group per
    (decayed or not, learning-rate multiplier) that the model's ``lr_multipliers`` name (tinygpt/model/mup.py),
    at ``lr`` times its multiplier. Such a group's weight decay is divided by the multiplier, so that AdamW's
    per-step shrink, lr · weight_decay, is the same for every matrix at every width (decoupled, width-independent
    decay). A model without multipliers (sp, the LSTM) gets the two groups it always had, in the same order."""
    multipliers: dict[str, float] = getattr(model, "lr_multipliers", {})
    groups: dict[tuple[bool, float], list] = {(True, 1.0): [], (False, 1.0): []}
    for name, param in model.named_parameters():
        if param.requires_grad:
            decays = DECAY_GROUPS[decay_on](param)
            groups.setdefault((decays, multipliers.get(name, 1.0)), []).append(param)
    out = []
    for (decays, multiplier), params in groups.items():
        group = {"params": params, "weight_decay": weight_decay / multiplier if decays else 0.0}
        if multiplier != 1.0:
            group["lr"] = lr * multiplier
        out.append(group)
    return out
