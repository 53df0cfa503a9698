"""The spec's two table shapes, in Markdown, from a sweep's jobs.

- ``seeds`` (000, "What changed since GPT-2"): one row per variant, its parameter count, each seed's best
  validation score ("seeds 1 / 2 / 3"), their mean and spread (max - min).
- ``steps`` (003, "Build a tiny GPT"): one row per variant and seed, the dev score at each scoring step.

Runs that are not finished never enter a mean. The seeds table shows an unfinished run's best so far marked
``*``, and otherwise its status (``failed``, ``missing``, ``no record``); the steps table shows whatever
points a run has (``*`` if it did not finish) and its status beside the seed.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tinygpt.common.run_folder import DEV_BITS_PER_BYTE, DEV_LOSS
from tinygpt.report.jobs import FINISHED, UNFINISHED, Job

UNFINISHED_MARK = "*"


@dataclass(frozen=True)
class Metric:
    key: str  # its field in run.json's curve points and in its "best" (tinygpt/common/run_folder.py)
    label: str  # for table headers and axes


METRICS = {
    metric.key: metric
    for metric in (Metric(DEV_LOSS, "validation loss"), Metric(DEV_BITS_PER_BYTE, "dev bits per byte"))
}


def variants(jobs: Sequence[Job]) -> dict[tuple[str, ...], list[Job]]:
    """Jobs grouped by their overrides minus the seed, in launch order; each group sorted by seed."""
    groups: dict[tuple[str, ...], list[Job]] = {}
    for job in jobs:
        groups.setdefault(job.variant, []).append(job)
    return {key: sorted(group, key=lambda j: (j.seed is None, j.seed or 0)) for key, group in groups.items()}


def variant_labels(keys: Sequence[tuple[str, ...]]) -> dict[tuple[str, ...], str]:
    """Short row labels: only the overrides that differ between variants (the shared ones go in the notes).
    A variant that sets none of them is "(all runs)" when it is the only one, else "(defaults)": beside
    `data/fraction=quarter` it is the run with the experiment's own fraction, not every run."""
    shared = set.intersection(*(set(key) for key in keys)) if keys else set()
    empty = "(all runs)" if len(keys) == 1 else "(defaults)"
    return {key: ", ".join(o for o in key if o not in shared) or empty for key in keys}


def shared_overrides(keys: Sequence[tuple[str, ...]]) -> list[str]:
    if not keys:
        return []
    shared = set.intersection(*(set(key) for key in keys))
    return [o for o in keys[0] if o in shared]


def best_value(job: Job, metric: Metric) -> float | None:
    best = (job.record or {}).get("best") or {}
    return best.get(metric.key)


def curve(job: Job, metric: Metric) -> dict[int, float]:
    return {p["step"]: p[metric.key] for p in (job.record or {}).get("curve", []) if metric.key in p}


def parameters(group: Sequence[Job]) -> str:
    counts = {job.record["parameters"] for job in group if job.record and "parameters" in job.record}
    return ", ".join(f"{n:,}" for n in sorted(counts)) or "—"


def seed_label(job: Job) -> str:
    return "—" if job.seed is None else str(job.seed)


def seed_cell(job: Job, value: float | None, digits: int) -> str:
    """A run's best value in the seeds table: marked if the run is unfinished, its status if it has none."""
    if value is not None and job.status == FINISHED:
        return f"{value:.{digits}f}"
    if value is not None and job.status == UNFINISHED:
        return f"{value:.{digits}f}{UNFINISHED_MARK}"
    return job.status


def step_cell(job: Job, value: float | None, digits: int) -> str:
    """A run's value at one step in the steps table (its status is in the seed column)."""
    if value is None:
        return "—"
    return f"{value:.{digits}f}" + ("" if job.status == FINISHED else UNFINISHED_MARK)


def seeds_table(jobs: Sequence[Job], metric: Metric, digits: int = 3) -> str:
    groups = variants(jobs)
    labels = variant_labels(list(groups))
    seeds = sorted({job.seed for job in jobs if job.seed is not None})
    seed_names = " / ".join(str(s) for s in seeds) if seeds else "—"
    lines = [
        f"| Variant | Parameters | Best {metric.label}, seeds {seed_names} | Mean | Spread |",
        "| --- | ---: | --- | ---: | ---: |",
    ]
    for key, group in groups.items():
        by_seed = {job.seed: job for job in group}
        cells = [seed_cell(by_seed[s], best_value(by_seed[s], metric), digits) if s in by_seed else "—" for s in seeds]
        finished = [v for job in group if job.status == FINISHED and (v := best_value(job, metric)) is not None]
        mean = f"{statistics.fmean(finished):.{digits}f}" if finished else "—"
        if finished and len(finished) < len(seeds):
            mean += f" ({len(finished)} of {len(seeds)})"
        spread = f"{max(finished) - min(finished):.{digits}f}" if len(finished) > 1 else "—"
        lines.append(f"| {labels[key]} | {parameters(group)} | {' / '.join(cells)} | {mean} | {spread} |")
    return "\n".join(lines)


def steps_table(jobs: Sequence[Job], metric: Metric, digits: int = 3) -> str:
    groups = variants(jobs)
    labels = variant_labels(list(groups))
    steps = sorted({step for job in jobs for step in curve(job, metric)})
    lines = [
        f"| Variant | Seed | Parameters | {' | '.join(f'step {s:,}' for s in steps)} |",
        "| --- | ---: | ---: |" + " ---: |" * len(steps),
    ]
    for key, group in groups.items():
        for job in group:
            points = curve(job, metric)
            cells = [step_cell(job, points.get(step), digits) for step in steps]
            seed = seed_label(job)
            if job.status != FINISHED:
                seed += f" ({job.status})"
            lines.append(f"| {labels[key]} | {seed} | {parameters([job])} | {' | '.join(cells)} |")
    return "\n".join(lines)


def scoring_steps(jobs: Sequence[Job]) -> set[tuple[int, ...]]:
    """The distinct step lists at which the finished runs were scored."""
    return {tuple(p["step"] for p in job.record.get("curve", [])) for job in jobs if job.status == FINISHED}


def auto_style(jobs: Sequence[Job], max_step_columns: int = 6) -> str:
    """``steps`` when every finished run was scored at the same few steps (003's tables: 4 columns), else
    ``seeds`` (000's table: one number per seed)."""
    step_lists = scoring_steps(jobs)
    if len(step_lists) == 1 and 0 < len(next(iter(step_lists))) <= max_step_columns:
        return "steps"
    return "seeds"


def has_diagnostics(jobs: Sequence[Job]) -> bool:
    return any((job.record or {}).get("diagnostics") for job in jobs)


def diagnostics_table(jobs: Sequence[Job]) -> str:
    """003's collapse check (diagnostics.collapse_steps), one row per run and measured step: the train loss,
    the gradient norm at each layer's attention weights, and at the end the prediction TVD of two contexts."""
    groups = variants(jobs)
    labels = variant_labels(list(groups))
    lines = [
        "| Variant | Seed | Step | Train loss (bits) | Attention gradient norm, layers 1… | "
        "TVD of two contexts' predictions (at the end) | Unigram entropy of the training text (bits) |",
        "| --- | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for key, group in groups.items():
        for job in group:
            diagnostics = (job.record or {}).get("diagnostics")
            if not diagnostics:
                continue
            seed = seed_label(job)
            tvd = diagnostics.get("prediction_tvd")
            tvd_cell = f"{tvd:.3f} (step {diagnostics['prediction_tvd_step']:,})" if tvd is not None else "—"
            entropy = diagnostics.get("unigram_entropy_bits")
            entropy_cell = f"{entropy:.3f}" if entropy is not None else "—"
            for step, point in sorted(diagnostics.get("steps", {}).items(), key=lambda item: int(item[0])):
                loss = point.get("train_loss_bits")
                norms = " ".join(f"{n:.1e}" for n in point.get("attention_grad_norms", []))
                lines.append(
                    f"| {labels[key]} | {seed} | {int(step):,} | "
                    f"{'—' if loss is None else f'{loss:.3f}'} | {norms} | {tvd_cell} | {entropy_cell} |"
                )
    return "\n".join(lines)
