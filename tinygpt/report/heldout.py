"""Held-out scores of a sweep's runs, read from each run's ``evaluations.jsonl`` (written by
``scripts/evaluate.py split=test``), for ``scripts/report.py --held-out`` only.

The rest of the report never reads these, so a sweep's tables cannot steer choices toward the test split.
Here they are shown after the fact: 003's data-fraction table (held-out bits per byte at every kept checkpoint)
and its pre-registered score (the fixed last step).
"""

from __future__ import annotations

from collections.abc import Sequence

from tinygpt.common.run_folder import BITS_PER_BYTE, read_evaluations
from tinygpt.report.jobs import Job
from tinygpt.report.tables import Metric, seed_label, step_cell, variant_labels, variants

# its key names the evaluations.jsonl field (a row names its split; run.json's curve fields are dev_<key>)
HELD_OUT = Metric(BITS_PER_BYTE, "held-out bits per byte")


def held_out_curve(job: Job, metric: Metric = HELD_OUT) -> dict[int, float]:
    """Held-out bits per byte by checkpoint step; the latest scoring of a step wins."""
    if job.path is None:
        return {}
    points = {}
    for row in read_evaluations(job.path):
        if row.get("split") == "test" and row.get("step") is not None:
            points[int(row["step"])] = float(row[metric.key])
    return points


def held_out_table(jobs: Sequence[Job], digits: int = 3) -> str:
    groups = variants(jobs)
    labels = variant_labels(list(groups))
    curves = {id(job): held_out_curve(job) for job in jobs}
    steps = sorted({step for points in curves.values() for step in points})
    lines = [f"| Variant | Seed | {' | '.join(f'step {s:,}' for s in steps)} | best (step) |",
             "| --- | ---: |" + " ---: |" * (len(steps) + 1)]
    for key, group in groups.items():
        for job in group:
            points = curves[id(job)]
            if not points:
                continue
            best_step = min(points, key=points.get)
            cells = [step_cell(job, points.get(step), digits) for step in steps]
            seed = seed_label(job)
            lines.append(f"| {labels[key]} | {seed} | {' | '.join(cells)} | "
                         f"{points[best_step]:.{digits}f} ({best_step:,}) |")
    return "\n".join(lines)
