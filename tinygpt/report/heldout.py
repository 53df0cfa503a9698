"""Held-out scores of a sweep's runs, read from each run's ``evaluations.jsonl`` (written by
``scripts/evaluate.py split=test``), for ``scripts/report.py --held-out`` only.

The rest of the report never reads these, so a sweep's tables cannot steer choices toward the test split; it
only counts the scorings that run.json lists (``held_out_scorings``, which holds no score), so its wording can
say that held-out scores exist without showing them. Here they are shown after the fact: every held-out scoring
ever made (time, run, step, checkpoint, forced or not, reason), and 003's data-fraction table (held-out bits per
byte at every kept checkpoint, each step's first scoring: score once, a forced second look is only in the log).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tinygpt.common.run_folder import BITS_PER_BYTE, evaluations_path, read_evaluations
from tinygpt.report.jobs import Job
from tinygpt.report.tables import Metric, seed_label, step_cell, variant_labels, variants

# its key names the evaluations.jsonl field (a row names its split; run.json's curve fields are dev_<key>)
HELD_OUT = Metric(BITS_PER_BYTE, "held-out bits per byte")


def scorings(job: Job) -> list[dict]:
    """The run's held-out scorings of its checkpoints, in the order they were made (evaluations.jsonl)."""
    if job.path is None:
        return []
    return [row for row in read_evaluations(job.path) if row.get("split") == "test" and row.get("step") is not None]


def scoring_counts(jobs: Sequence[Job]) -> tuple[int, int, int]:
    """(scorings, runs scored, runs with an evaluations.jsonl that run.json does not list) from run.json and the
    file's existence alone: no score is read."""
    n, runs, unlisted = 0, 0, 0
    for job in jobs:
        listed = len((job.record or {}).get("held_out_scorings") or [])
        n, runs = n + listed, runs + bool(listed)
        if not listed and job.path is not None and evaluations_path(job.path).exists():
            unlisted += 1  # scored before run.json listed scorings (or by a tool that does not list them)
    return n, runs, unlisted


def held_out_curve(job: Job, metric: Metric = HELD_OUT) -> dict[int, float]:
    """Held-out bits per byte by checkpoint step: each step's first scoring (a forced second one is in the log)."""
    points: dict[int, float] = {}
    for row in scorings(job):
        points.setdefault(int(row["step"]), float(row[metric.key]))
    return points


def held_out_value(job: Job) -> tuple[int, float] | None:
    """(step, score) that stands for the run in the held-out comparison: the first scoring at its last
    pre-registered step that was scored (score_once.steps in run.json), else at its last scored step."""
    points = held_out_curve(job)
    registered = [s for s in ((job.record or {}).get("score_once") or {}).get("steps") or [] if s in points]
    steps = registered or sorted(points)
    return (steps[-1], points[steps[-1]]) if steps else None


def scorings_table(jobs: Sequence[Job], digits: int = 3) -> str:
    """Every held-out scoring ever made of the sweep's runs, by time: run, seed, step, checkpoint, score, forced,
    reason, and the tool that made it."""
    rows = [(row, job) for job in jobs for row in scorings(job)]
    rows.sort(key=lambda pair: str(pair[0].get("time", "")))
    lines = [
        "| Time | Run | Seed | Step | Checkpoint | Held-out bits per byte | Forced | Reason | By |",
        "| --- | --- | ---: | ---: | --- | ---: | --- | --- | --- |",
    ]
    for row, job in rows:
        forced = row.get("forced")
        lines.append(
            f"| {row.get('time', '—')} | {job.name} | {seed_label(job)} | {int(row['step']):,} | "
            f"{Path(str(row.get('checkpoint', '—'))).name} | {float(row[BITS_PER_BYTE]):.{digits}f} | "
            f"{'—' if forced is None else ('yes' if forced else 'no')} | {row.get('reason') or '—'} | "
            f"{row.get('source') or 'evaluate'} |"
        )
    return "\n".join(lines)


def held_out_table(jobs: Sequence[Job], digits: int = 3) -> str:
    groups = variants(jobs)
    labels = variant_labels(list(groups))
    curves = {id(job): held_out_curve(job) for job in jobs}
    steps = sorted({step for points in curves.values() for step in points})
    lines = [
        f"| Variant | Seed | {' | '.join(f'step {s:,}' for s in steps)} | best (step) |",
        "| --- | ---: |" + " ---: |" * (len(steps) + 1),
    ]
    for key, group in groups.items():
        for job in group:
            points = curves[id(job)]
            if not points:
                continue
            best_step = min(points, key=points.get)
            cells = [step_cell(job, points.get(step), digits) for step in steps]
            seed = seed_label(job)
            lines.append(
                f"| {labels[key]} | {seed} | {' | '.join(cells)} | {points[best_step]:.{digits}f} ({best_step:,}) |"
            )
    return "\n".join(lines)
