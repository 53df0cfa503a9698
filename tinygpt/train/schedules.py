"""Learning-rate schedules as multipliers of the peak rate, indexed by optimizer step, and SCHEDULES: the
registry `optim.schedule` names.

Each schedule warms up linearly over ``warmup_steps`` (step 1 runs at 1/warmup of the peak, as in 003's
loop), then follows its own shape until ``total_steps``. ``min_lr_ratio`` is the floor the decaying
schedules reach at the end (003's cosine decays to 10% of the peak). Adding a schedule is one function here,
registered in SCHEDULES, and one file conf/optim/schedule/<name>.yaml: OptimConfig's allowed names, its error
message and lr_multiplier's dispatch all read the registry.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

from tinygpt.common.errors import ConfigError


def _constant(step: int, warmup_steps: int, total_steps: int, min_lr_ratio: float, decay_fraction: float) -> float:
    return 1.0


def _cosine(step: int, warmup_steps: int, total_steps: int, min_lr_ratio: float, decay_fraction: float) -> float:
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def _linear(step: int, warmup_steps: int, total_steps: int, min_lr_ratio: float, decay_fraction: float) -> float:
    progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    return 1.0 - (1 - min_lr_ratio) * progress


def _wsd(step: int, warmup_steps: int, total_steps: int, min_lr_ratio: float, decay_fraction: float) -> float:
    # warmup-stable-decay: hold the peak, then decay linearly over the last ``decay_fraction`` of training
    decay_start = total_steps - int(decay_fraction * total_steps)
    if step <= decay_start:
        return 1.0
    progress = min(1.0, (step - decay_start) / max(1, total_steps - decay_start))
    return 1.0 - (1 - min_lr_ratio) * progress


# optim.schedule's names and their shapes after warmup: (step, warmup_steps, total_steps, min_lr_ratio,
# decay_fraction) -> multiplier, called for 1-based steps past the warmup only.
SCHEDULES: dict[str, Callable[[int, int, int, float, float], float]] = {
    "constant": _constant,
    "cosine": _cosine,
    "linear": _linear,
    "wsd": _wsd,
}


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
    if schedule not in SCHEDULES:
        raise ConfigError(f"optim.schedule={schedule!r} is not a schedule; allowed: {', '.join(SCHEDULES)}")
    step = index + 1
    if step <= warmup_steps:
        return _warmup(step, warmup_steps)
    return SCHEDULES[schedule](step, warmup_steps, total_steps, min_lr_ratio, decay_fraction)


def make_lr_lambda(**kwargs) -> partial:
    """A picklable ``LambdaLR`` function (a partial, not a closure, so checkpoints stay plain)."""
    lr_multiplier(0, **kwargs)  # validate the schedule name before training starts
    return partial(lr_multiplier, **kwargs)
