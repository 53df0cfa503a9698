"""Learning-rate schedules as multipliers of the peak rate, indexed by optimizer step.

Each schedule warms up linearly over ``warmup_steps`` (step 1 runs at 1/warmup of the peak, as in 003's
loop), then follows its own shape until ``total_steps``. ``min_lr_ratio`` is the floor the decaying
schedules reach at the end (003's cosine decays to 10% of the peak).
"""

from __future__ import annotations

import math
from functools import partial

SCHEDULES = ("constant", "cosine", "linear", "wsd")


def _warmup(step: int, warmup_steps: int) -> float:
    return min(1.0, step / warmup_steps) if warmup_steps > 0 else 1.0


def lr_multiplier(
    index: int,
    *,
    schedule: str,
    warmup_steps: int,
    total_steps: int,
    min_lr_ratio: float = 0.1,
    decay_fraction: float = 0.2,
) -> float:
    """Multiplier of the peak rate for the optimizer step with 0-based ``index`` (so step = index + 1)."""
    step = index + 1
    warm = _warmup(step, warmup_steps)
    if schedule == "constant" or step <= warmup_steps:
        return warm
    if schedule == "cosine":
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
    if schedule == "linear":
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return 1.0 - (1 - min_lr_ratio) * progress
    if schedule == "wsd":
        # warmup-stable-decay: hold the peak, then decay linearly over the last ``decay_fraction`` of training
        decay_start = total_steps - int(decay_fraction * total_steps)
        if step <= decay_start:
            return 1.0
        progress = min(1.0, (step - decay_start) / max(1, total_steps - decay_start))
        return 1.0 - (1 - min_lr_ratio) * progress
    raise ValueError(f"optim.schedule={schedule!r} is not a schedule; allowed: {', '.join(SCHEDULES)}")


def make_lr_lambda(**kwargs) -> partial:
    """A picklable ``LambdaLR`` function (a partial, not a closure, so checkpoints stay plain)."""
    lr_multiplier(0, **kwargs)  # validate the schedule name before training starts
    return partial(lr_multiplier, **kwargs)
