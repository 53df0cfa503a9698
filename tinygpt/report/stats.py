"""Each variant against a reference variant, paired by seed: the differences, a 95% interval and a verdict.

Why paired: tinygpt draws a run's batches from its seed and its data settings alone (tinygpt/data/batches.py), and
its initialisation from its seed, so two variants trained with the same seed on the same data see the same
windows in the same order. Their difference in one seed is then free of the batch order's share of the noise, and
the seeds' differences are a sample of the variant's effect: the interval is the t distribution's over them
(``scipy.stats.ttest_rel``), which is far narrower than comparing two means whose seeds each wander (000: "the
seed-to-seed spread within a row is about 0.05 to 0.1"). When a variant changes what the batches are (another
corpus, tokenizer, fraction, split, batch size or context: ``BATCH_FIELDS``) the seeds no longer match up, the
pairing is refused, saying which setting differs, and the comparison is unpaired: Welch's interval for the
difference of the two means (``scipy.stats.ttest_ind(equal_var=False)``).

Lower is better for every metric the report reads (losses, bits per byte), so a difference below zero means
the variant is better. The verdict: ``better`` when the whole interval is below zero, ``worse`` when it is above,
else ``within seed noise``; with one seed (or one run on a side, unpaired) there is no interval and it says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy import stats

from tinygpt.train.score_once import flatten

CONFIDENCE = 0.95
BETTER, WORSE, NOISE = "better", "worse", "within seed noise"
ONE_SEED = "one seed: no interval"

# the recorded settings (run.json's config, dotted) that decide which batches a seed draws: a variant that changes
# one of them sees other windows, so its seeds cannot be paired with the reference's. Left out on purpose:
# data.root (where the same files are read from) and data.eval_batch_size (how validation is batched, not what).
BATCH_FIELDS = (
    "data.name",
    "data.corpus",
    "data.path",
    "data.glob",
    "data.tokenizer",
    "data.fraction",
    "data.split_unit",
    "data.split_seed",
    "data.dev",
    "data.dev_fraction",
    "data.dev_k",
    "data.test_fraction",
    "data.test_k",
    "data.test_documents",
    "data.batch_size",
    "model.context_length",
)


@dataclass(frozen=True)
class Interval:
    mean: float
    low: float | None  # None: no interval (one seed, or one run on a side)
    high: float | None


def paired_interval(values: Sequence[float], reference: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """Mean of ``values[i] - reference[i]`` and its t interval over the pairs (scipy.stats.ttest_rel). Equal
    differences in every seed have no spread: the interval is that difference itself."""
    differences = [v - r for v, r in zip(values, reference, strict=True)]
    mean = math.fsum(differences) / len(differences)
    if len(differences) < 2:
        return Interval(mean, None, None)
    if max(differences) == min(differences):
        return Interval(mean, mean, mean)
    low, high = stats.ttest_rel(values, reference).confidence_interval(confidence_level=confidence)
    return Interval(mean, float(low), float(high))


def welch_interval(values: Sequence[float], reference: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """Difference of the two means and Welch's interval for it (scipy.stats.ttest_ind with equal_var=False)."""
    mean = math.fsum(values) / len(values) - math.fsum(reference) / len(reference)
    if len(values) < 2 or len(reference) < 2:
        return Interval(mean, None, None)
    if max(values) == min(values) and max(reference) == min(reference):
        return Interval(mean, mean, mean)
    result = stats.ttest_ind(values, reference, equal_var=False)
    low, high = result.confidence_interval(confidence_level=confidence)
    return Interval(mean, float(low), float(high))


def verdict(interval: Interval) -> str:
    if interval.low is None:
        return ONE_SEED
    if interval.high < 0:
        return BETTER
    if interval.low > 0:
        return WORSE
    return NOISE


def batch_settings(config: Mapping) -> dict:
    """The recorded settings that decide the batches (``BATCH_FIELDS``); a nested one (data.tokenizer) whole."""
    flat = flatten(config)
    settings = {}
    for name in BATCH_FIELDS:
        inner = {k: v for k, v in flat.items() if k == name or k.startswith(name + ".")}
        settings[name] = inner or None
    return settings


def batch_difference(configs: Sequence[Mapping], reference_configs: Sequence[Mapping]) -> str | None:
    """Why the two variants' seeds do not draw the same batches ("data.fraction: 0.25 against 1.0"), or None
    when every run on both sides has the same batch settings."""
    sides = [{_frozen(batch_settings(c)) for c in configs}, {_frozen(batch_settings(c)) for c in reference_configs}]
    if len(sides[0] | sides[1]) <= 1:
        return None
    ours, theirs = batch_settings(configs[0]), batch_settings(reference_configs[0])
    for name in BATCH_FIELDS:
        if ours[name] != theirs[name]:
            return f"{name}: {_show(ours[name], name)} against {_show(theirs[name], name)}"
    return "the batch settings differ between the seeds of one variant"


def _frozen(settings: dict) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in settings.items()))


def _show(value: dict | None, name: str) -> str:
    if value is None:
        return "unset"
    if list(value) == [name]:
        return repr(value[name])
    return ", ".join(f"{k.removeprefix(name + '.')}={v!r}" for k, v in value.items())


@dataclass(frozen=True)
class Comparison:
    """One variant against the reference at one measure (e.g. the best dev bits per byte of each run)."""

    measure: str
    paired: bool
    seeds: tuple[int, ...]  # paired: the seeds both sides finished; unpaired: the variant's seeds
    differences: tuple[float, ...]  # paired: per seed, variant - reference; unpaired: empty
    interval: Interval
    better_in: int  # paired: seeds in which the variant is lower; unpaired: its runs below the reference's mean
    n: int  # paired: pairs; unpaired: the variant's runs
    reference_n: int
    unpaired_because: str | None = None

    @property
    def verdict(self) -> str:
        return verdict(self.interval)


def compare(
    measure: str,
    values: Mapping[int, float],
    reference: Mapping[int, float],
    unpaired_because: str | None = None,
) -> Comparison | None:
    """``values`` and ``reference``: {seed: value} of the finished runs of the variant and of the reference. Paired
    on the seeds both have unless ``unpaired_because`` says why the batches differ. None when a side has no run."""
    if not values or not reference:
        return None
    if unpaired_because is None:
        seeds = tuple(sorted(set(values) & set(reference)))
        if not seeds:
            return None
        ours, theirs = [values[s] for s in seeds], [reference[s] for s in seeds]
        differences = tuple(v - r for v, r in zip(ours, theirs, strict=True))
        return Comparison(
            measure,
            True,
            seeds,
            differences,
            paired_interval(ours, theirs),
            sum(d < 0 for d in differences),
            len(seeds),
            len(seeds),
        )
    ours, theirs = list(values.values()), list(reference.values())
    reference_mean = math.fsum(theirs) / len(theirs)
    return Comparison(
        measure,
        False,
        tuple(sorted(values)),
        (),
        welch_interval(ours, theirs),
        sum(v < reference_mean for v in ours),
        len(ours),
        len(theirs),
        unpaired_because,
    )
