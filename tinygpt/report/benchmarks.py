"""The report's benchmark section: each run's lm-evaluation-harness scores (``<run>/lm_eval/<task>.json``, written
by tinygpt-lm-eval), a column per task and metric, for the runs that have them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tinygpt.common.run_folder import LM_EVAL
from tinygpt.report.jobs import Job

SHOWN = ("acc", "acc_norm", "exact_match")  # the harness's headline metrics; stderr and aliases are left out


def benchmark_scores(run_dir: Path) -> dict[str, tuple[float, object]]:
    """``<task>/<metric>`` -> (value, the limit it was run with) for one run."""
    scores = {}
    for path in sorted((Path(run_dir) / LM_EVAL).glob("*.json")):
        written = json.loads(path.read_text())
        for key, value in written["results"].items():
            metric = key.split(",")[0]  # the harness names them "acc,none"
            if metric in SHOWN and isinstance(value, int | float):
                scores[f"{path.stem}/{metric}"] = (float(value), written.get("limit"))
    return scores


def benchmarks_section(jobs: Sequence[Job]) -> list[str]:
    """Markdown lines: a row per run that has scores, a column per task and metric; none when no run has any."""
    rows = [(job, benchmark_scores(job.path)) for job in jobs if job.path is not None]
    rows = [(job, scores) for job, scores in rows if scores]
    if not rows:
        return []
    columns = sorted({column for _, scores in rows for column in scores})
    lines = ["", "## Benchmarks (lm-evaluation-harness)", "", "| run | " + " | ".join(columns) + " |"]
    lines.append("|---|" + "---:|" * len(columns))
    for job, scores in rows:
        cells = [f"{scores[c][0]:.4f}" if c in scores else "" for c in columns]
        lines.append(f"| {job.name} | " + " | ".join(cells) + " |")
    limits = sorted({str(limit) for _, scores in rows for _, limit in scores.values() if limit is not None})
    lines += [
        "",
        "From each run's `lm_eval/<task>.json` (`tinygpt-lm-eval`); "
        + (f"run on the first {', '.join(limits)} items of a task (limit)." if limits else "every item of each task.")
        + " Chance is 1/number of choices (25% for HellaSwag's four endings).",
        "",
    ]
    return lines
