"""The report's comparison of every variant with a reference variant: which reference, the table, comparison.csv.

The reference is the variant that sets the experiment's defaults (000's GPT-2 style, 003's baseline): the one
whose recorded settings, at every setting on which the variants differ, are what the experiment gives when none
of the variants' overrides is applied. The caller composes that config (``defaults``: tinygpt/cli/report.py
composes conf/train.yaml with the overrides every run shares), so this module reads no config folder. A user may
name another (``--reference ablation=rope``); when no variant matches the defaults, the first launched is taken,
and the report says which rule chose it.

The statistics are tinygpt/report/stats.py's: paired by seed where the batches are shared, else Welch's.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tinygpt.common.errors import ConfigError
from tinygpt.report.jobs import FINISHED, Job
from tinygpt.report.stats import CONFIDENCE, Comparison, batch_difference, compare
from tinygpt.train.score_once import NOT_RECIPE, flatten

Key = tuple[str, ...]
# settings that differ between variants without being what they compare: the seed, and what says where or how a
# run executes, which the score-once ledger already keeps out of a recipe
NOT_COMPARED = ("seed", *NOT_RECIPE)

COMPARISON_COLUMNS = [
    "metric",
    "measure",
    "variant",
    "reference",
    "paired",
    "seeds",
    "differences",
    "mean_difference",
    "ci95_low",
    "ci95_high",
    "better_in",
    "runs",
    "reference_runs",
    "verdict",
    "unpaired_because",
]


@dataclass(frozen=True)
class Reference:
    key: Key
    why: str  # how it was chosen, for the report


def _config(job: Job) -> dict:
    return (job.record or {}).get("config") or {}


def _compared(name: str) -> bool:
    return not any(name == p or name.startswith(p + ".") for p in NOT_COMPARED)


def varying_settings(groups: Mapping[Key, Sequence[Job]]) -> list[str]:
    """The recorded settings (dotted) whose values differ between the variants' runs, less the execution-only ones."""
    flats = [flatten(_config(job)) for group in groups.values() for job in group if job.record]
    names = sorted({name for flat in flats for name in flat})
    return [n for n in names if _compared(n) and len({repr(flat.get(n)) for flat in flats}) > 1]


def choose_reference(
    groups: Mapping[Key, Sequence[Job]],
    requested: Sequence[str] = (),
    defaults: Callable[[], Mapping] | None = None,
    shared: Sequence[str] = (),
) -> Reference:
    """The variant every other is compared with. ``requested``: overrides naming it (every one must be among the
    variant's); ``defaults``: returns the config the experiment gives without the variants' overrides."""
    keys = list(groups)
    if requested:
        matches = [key for key in keys if set(requested) <= set(key)]
        if len(matches) != 1:
            named = "; ".join(" ".join(key) or "(no overrides)" for key in keys)
            found = "no variant" if not matches else f"{len(matches)} variants"
            raise ConfigError(
                f"--reference {' '.join(requested)}: {found} of this sweep has these overrides; name one of: {named}"
            )
        return Reference(matches[0], f"`{' '.join(requested)}`, chosen with --reference")
    finished = [key for key in keys if any(job.status == FINISHED for job in groups[key])]
    if defaults is not None and len(finished) > 1:
        varying = varying_settings(groups)
        try:
            composed = flatten(defaults())
        except Exception as err:  # an override of an older checkout that today's conf/ no longer has
            first = finished[0]
            return Reference(
                first, f"the first finished variant (the experiment's defaults could not be composed: {err})"
            )
        for key in finished:
            recorded = [flatten(_config(job)) for job in groups[key] if job.record]
            if varying and all(repr(r.get(n)) == repr(composed.get(n)) for r in recorded for n in varying):
                base = f"`{' '.join(shared)}`" if shared else "conf/train.yaml"
                return Reference(
                    key,
                    "the variant that sets the experiment's defaults (the settings on which the variants differ, "
                    f"{', '.join(f'`{n}`' for n in varying)}, are what {base} gives without the variants' overrides)",
                )
    first = (finished or keys)[0]
    return Reference(
        first,
        "the first finished variant launched (no variant has the experiment's default settings; --reference names "
        "another)",
    )


def finished_values(group: Sequence[Job], value_of: Callable[[Job], float | None]) -> dict[int, float]:
    """{seed: value} of the group's finished runs that have one."""
    values = {}
    for job in group:
        if job.status == FINISHED and job.seed is not None and (v := value_of(job)) is not None:
            values[job.seed] = v
    return values


def comparisons(
    groups: Mapping[Key, Sequence[Job]],
    reference: Key,
    measures: Mapping[str, Callable[[Job], float | None]],
) -> list[tuple[Key, Comparison]]:
    """Every variant but the reference, at every measure (e.g. {"best": ..., "final": ...})."""
    references = groups[reference]
    out = []
    for key, group in groups.items():
        if key == reference:
            continue
        unpaired = batch_difference(
            [_config(j) for j in group if j.record], [_config(j) for j in references if j.record]
        )
        for measure, value_of in measures.items():
            comparison = compare(
                measure, finished_values(group, value_of), finished_values(references, value_of), unpaired
            )
            if comparison is not None:
                out.append((key, comparison))
    return out


def _number(value: float | None, digits: int, signed: bool = True) -> str:
    if value is None:
        return "—"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def comparison_table(rows: Sequence[tuple[Key, Comparison]], labels: Mapping[Key, str], digits: int = 3) -> str:
    lines = [
        "| Variant | Measure | Difference per seed (seeds) | Mean difference | "
        f"{CONFIDENCE:.0%} interval | Better in | Verdict |",
        "| --- | --- | --- | ---: | --- | ---: | --- |",
    ]
    for key, c in rows:
        if c.paired:
            per_seed = " / ".join(_number(d, digits) for d in c.differences)
            per_seed += f" ({' / '.join(str(s) for s in c.seeds)})"
            better = f"{c.better_in} of {c.n} seeds"
        else:
            per_seed = f"unpaired ({c.unpaired_because}): {c.n} against {c.reference_n} runs"
            better = f"{c.better_in} of {c.n} runs below the reference's mean"
        interval = (
            "—"
            if c.interval.low is None
            else f"[{_number(c.interval.low, digits)}, {_number(c.interval.high, digits)}]"
        )
        lines.append(
            f"| {labels[key]} | {c.measure} | {per_seed} | {_number(c.interval.mean, digits)} | {interval} | "
            f"{better} | {c.verdict} |"
        )
    return "\n".join(lines)


def comparison_section(
    rows: Sequence[tuple[Key, Comparison]],
    reference: Reference,
    labels: Mapping[Key, str],
    heading: str,
) -> list[str]:
    """The report's lines for one metric's comparisons (empty when there is nothing to compare)."""
    if not rows:
        return []
    paired = any(c.paired for _, c in rows)
    unpaired = any(not c.paired for _, c in rows)
    one_seed = any(c.interval.low is None for _, c in rows)
    notes = [
        f"Reference: **{labels[reference.key]}**, {reference.why}. Each difference is the variant's value minus the "
        f"reference's (below zero: the variant is better). Verdict: better or worse when the whole {CONFIDENCE:.0%} "
        "interval is on one side of zero, else within seed noise."
    ]
    if paired:
        notes.append(
            "Paired by seed: a variant and the reference trained with the same seed drew the same batches (the batch "
            "stream is a function of the seed and the data settings alone, tinygpt/data/batches.py, and these are "
            "equal), so each seed's difference is free of the batch order's noise; the interval is the t "
            "distribution's over the seeds' differences (`scipy.stats.ttest_rel`)."
        )
    if unpaired:
        notes.append(
            "Unpaired where a variant changes what the batches are (the setting is named in its row): its seeds do "
            "not share batches with the reference's, so the interval is Welch's for the difference of the two means "
            "(`scipy.stats.ttest_ind`, unequal variances)."
        )
    if one_seed:
        notes.append("With one seed (or one run on a side) there is no interval: the verdict says so.")
    return ["", heading, "", " ".join(notes), "", comparison_table(rows, labels), ""]


def write_comparison_csv(
    rows_by_metric: Mapping[str, Sequence[tuple[Key, Comparison]]], reference: Reference, path: Path
) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COMPARISON_COLUMNS)
        writer.writeheader()
        for metric, rows in rows_by_metric.items():
            for key, c in rows:
                writer.writerow(
                    {
                        "metric": metric,
                        "measure": c.measure,
                        "variant": " ".join(key),
                        "reference": " ".join(reference.key),
                        "paired": c.paired,
                        "seeds": " ".join(str(s) for s in c.seeds),
                        "differences": " ".join(repr(d) for d in c.differences),
                        "mean_difference": c.interval.mean,
                        "ci95_low": c.interval.low,
                        "ci95_high": c.interval.high,
                        "better_in": c.better_in,
                        "runs": c.n,
                        "reference_runs": c.reference_n,
                        "verdict": c.verdict,
                        "unpaired_because": c.unpaired_because or "",
                    }
                )
    return path
