"""A sweep's report: report.md (the spec-shaped table, each variant against a reference paired by seed, the
runs' provenance), curves.png (seed means and bands), runs.csv (every run's every validation point) and
comparison.csv (every comparison).

Reads run records only (tinygpt/report/jobs.py), never a held-out score: it counts the held-out scorings that
run.json lists and says so, without showing them. Runs that recorded 003's collapse diagnostics get their table
too. Only with held_out=True does it add the held-out scores that ``scripts/evaluate.py split=test`` logged
(tinygpt/report/heldout.py): every scoring ever made, the table by step, and heldout.png.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tinygpt.common.errors import ConfigError, PathError
from tinygpt.common.run_folder import DEV_BITS_PER_BYTE, DEV_LOSS
from tinygpt.report.benchmarks import benchmarks_section
from tinygpt.report.beside_baselines import baselines_section
from tinygpt.report.comparisons import (
    Reference,
    choose_reference,
    comparison_section,
    comparisons,
    write_comparison_csv,
)
from tinygpt.report.figures import plot_curves
from tinygpt.report.heldout import (
    HELD_OUT,
    held_out_curve,
    held_out_table,
    held_out_value,
    scoring_counts,
    scorings_table,
)
from tinygpt.report.jobs import Job, load_sweep, override_key
from tinygpt.report.provenance import provenance_section
from tinygpt.report.tables import (
    METRICS,
    UNFINISHED_MARK,
    Metric,
    auto_style,
    best_value,
    curve,
    diagnostics_table,
    has_diagnostics,
    seeds_table,
    shared_overrides,
    steps_table,
    variant_labels,
    variants,
)

STYLES = ("auto", "seeds", "steps")
# 000 scores best validation loss; 003 dev bits per byte
DEFAULT_METRIC = {"seeds": DEV_LOSS, "steps": DEV_BITS_PER_BYTE}

# runs.csv keeps its columns' names (best_dev_bpb, final_dev_bpb: docs/results/ holds CSVs with them); each
# is filled from the run record's one field for that metric
CSV_COLUMNS = [
    "job",
    "variant",
    "seed",
    "status",
    "parameters",
    "step",
    "best_step",
    "best_dev_loss",
    "best_dev_bpb",
    "final_step",
    "final_dev_loss",
    "final_dev_bpb",
    "final_train_loss",
    "wall_time_s",
    "folder",
]
# runs.csv has one row per validation point of each run (a run without one: one row, these cells empty); the
# run's columns above repeat on each of its rows, so one row per run is ``val_step == final_step``
POINT_COLUMNS = ["val_step", "dev_loss", "dev_bpb", "dev_bits_per_token", "dev_bits_per_char", "train_loss"]


@dataclass
class Report:
    markdown: Path
    figure: Path | None  # None when no run has a validation point (nothing to draw)
    table: Path
    style: str
    metric: str
    jobs: list[Job]
    comparison: Path | None  # comparison.csv; None with a single variant (nothing to compare)
    reference: Reference | None


def final_value(job: Job, metric: Metric) -> float | None:
    return ((job.record or {}).get("final") or {}).get(metric.key)


def scored_text(record: dict) -> tuple:
    """What a run's scores were taken on: its corpus's name and its dev and held-out splits' sizes and documents
    (the tokenizer aside: bits per byte compare across tokenizers on the same text). Runs with the same key scored
    the same characters; a data fraction changes only the train split, so its runs share one."""
    data = record.get("data") or {}
    splits = data.get("splits") or {}

    def split(name: str) -> tuple | None:
        entry = splits.get(name)
        return None if not entry else (entry.get("chars"), entry.get("bytes"), tuple(entry.get("documents") or ()))

    return ((data.get("corpus") or {}).get("name"), split("dev"), split("test"))


def check_one_text(jobs: list[Job], sweep_dir: Path) -> None:
    """Refuse, in one line, a sweep folder whose runs were scored on different texts: their bits per byte are not
    comparable, and the report would set them against each other (two sweeps that shared a folder's name)."""
    texts: dict[tuple, list[str]] = {}
    for job in jobs:
        if job.record:
            texts.setdefault(scored_text(job.record), []).append(job.name)
    if len(texts) > 1:
        kinds = "; ".join(f"{names[0]} ({len(names)} run(s)) on {key[0]}" for key, names in texts.items())
        raise ConfigError(
            f"{sweep_dir} holds runs scored on {len(texts)} different texts ({kinds}): a report sets only runs of "
            "one text against each other; give each sweep its own name=... (its folder is outputs/sweeps/<name>), "
            "or move the other runs out"
        )


def write_report(
    sweep_dir: str | Path,
    *,
    style: str = "auto",
    metric: str | None = None,
    out_dir: str | Path | None = None,
    held_out: bool = False,
    ymax: float | None = None,
    figure_only: Sequence[str] = (),
    title: str | None = None,
    reference: Sequence[str] = (),
    defaults: Callable[[Sequence[str]], Mapping] | None = None,
    baselines: Mapping[str, Mapping] | None = None,
) -> Report:
    """figure_only: draw only the runs with one of these overrides (000's figure shows 3 of the 6 variants).
    title: the report's and figures' name; by default sweep_title's. reference: overrides naming the variant the
    others are compared with; by default the one with the experiment's defaults, which ``defaults(shared
    overrides)`` composes (tinygpt/report/comparisons.py). baselines: {split: the record of tinygpt/baselines on
    the runs' data}, shown beside the dev table ("dev") and the held-out one ("test", with held_out)."""
    sweep_dir = Path(sweep_dir)
    out_dir = Path(out_dir) if out_dir else sweep_dir
    if style not in STYLES:
        raise ConfigError(f"style={style!r}: choose one of {STYLES}")
    jobs = load_sweep(sweep_dir)
    if not jobs:
        raise PathError(f"{sweep_dir} holds no sweep jobs (no multirun.yaml, no */.hydra/overrides.yaml)")
    check_one_text(jobs, sweep_dir)
    style = auto_style(jobs) if style == "auto" else style
    metric = metric or DEFAULT_METRIC[style]
    if metric not in METRICS:
        raise ConfigError(f"metric={metric!r}: choose one of {sorted(METRICS)}")
    out_dir.mkdir(parents=True, exist_ok=True)  # after every check: a refused report makes no folder
    chosen = METRICS[metric]
    title = title or sweep_title(sweep_dir, jobs)

    groups = variants(jobs)
    labels = variant_labels(list(groups))
    shared = shared_overrides(list(groups))
    chosen_reference = (
        choose_reference(groups, reference, (lambda: defaults(shared)) if defaults else None, shared)
        if len(groups) > 1 or reference
        else None
    )
    table = seeds_table(jobs, chosen) if style == "seeds" else steps_table(jobs, chosen)
    has_curves = any(curve(job, chosen) for job in jobs)
    if not has_curves:  # e.g. data.dev=none: nothing to tabulate but the statuses
        table = (
            f"No run has a {chosen.label} (a sweep without a dev split, `data.dev=none`, has none); "
            "runs.csv lists their statuses" + (", and the held-out section their scores." if held_out else ".")
        )
    drawn = [job for job in jobs if not figure_only or set(figure_only) & set(job.overrides)]
    if figure_only and not drawn:
        raise ConfigError(f"figure_only={list(figure_only)}: no run has any of these overrides")
    # no validation point anywhere: an empty set of axes would read as a figure, so none is drawn
    figure = (
        plot_curves(
            drawn,
            chosen,
            out_dir / "curves.png",
            title=f"{title}: {chosen.label}",
            ymax=ymax,
            reference=chosen_reference.key if chosen_reference else None,
        )
        if has_curves
        else None
    )
    if baselines and "test" in baselines and not held_out:
        raise ConfigError("the held-out baselines go beside the held-out table: ask for held_out too")
    runs_csv = write_runs_csv(jobs, out_dir / "runs.csv")
    markdown = out_dir / "report.md"
    sections = render_markdown(sweep_dir, jobs, table, style, chosen.label, held_out, title, has_curves)
    compared: dict[str, list] = {}
    if chosen_reference is not None:
        compared[chosen.key] = comparisons(
            groups,
            chosen_reference.key,
            {
                f"best {chosen.label}": lambda job: best_value(job, chosen),
                f"final {chosen.label}": lambda job: final_value(job, chosen),
            },
        )
        sections += "\n".join(
            comparison_section(
                compared[chosen.key],
                chosen_reference,
                labels,
                f"## Each variant against the reference ({chosen.label})",
            )
        )
    if baselines and "dev" in baselines:
        dev_bpb = METRICS[DEV_BITS_PER_BYTE]
        sections += "\n".join(
            baselines_section(
                groups,
                labels,
                baselines["dev"],
                lambda job: best_value(job, dev_bpb),
                "best dev bits per byte",
                "## Beside the baselines (dev)",
            )
        )
    sections += "\n".join(benchmarks_section(jobs))
    if has_diagnostics(jobs):
        sections += "\n".join(
            [
                "",
                "## Collapse diagnostics (003)",
                "",
                diagnostics_table(jobs),
                "",
                "Gradient norms are measured before clipping. TVD: total variation distance "
                "between the next-token predictions after two different training windows "
                "(0: the output ignores the input).",
                "",
            ]
        )
    if held_out:
        plot_curves(
            drawn,
            HELD_OUT,
            out_dir / "heldout.png",
            title=f"{title}: {HELD_OUT.label}",
            points_of=held_out_curve,
            reference=chosen_reference.key if chosen_reference else None,
        )
        sections += "\n".join(
            [
                "",
                "## Held-out scores (evaluations.jsonl)",
                "",
                "Every scoring of the held-out split ever made of these runs, by time "
                "(`tinygpt-evaluate split=test`, and `tinygpt-analyze` / `tinygpt-baselines` with "
                "split=test). Forced: a second look that score-once refuses unless forced with a "
                "reason (`—`: logged before this was recorded).",
                "",
                scorings_table(jobs),
                "",
                "By checkpoint step, each step's first scoring. Read these after the choices are "
                "made: the pre-registered score is the one at the step fixed in advance.",
                "",
                held_out_table(jobs),
                "",
                "![held-out scores](heldout.png)",
                "",
            ]
        )
        if chosen_reference is not None:
            compared[HELD_OUT.key] = comparisons(
                groups, chosen_reference.key, {HELD_OUT.label: lambda job: (held_out_value(job) or (None, None))[1]}
            )
            sections += "\n".join(
                comparison_section(
                    compared[HELD_OUT.key],
                    chosen_reference,
                    labels,
                    "## Held-out: each variant against the reference\n\nEach run's held-out score at its last "
                    "pre-registered step that was scored (score_once in run.json), else at its last scored step; "
                    "the first scoring of that step.",
                )
            )
        if baselines and "test" in baselines:
            sections += "\n".join(
                baselines_section(
                    groups,
                    labels,
                    baselines["test"],
                    lambda job: (held_out_value(job) or (None, None))[1],
                    "held-out bits per byte",
                    "## Beside the baselines (held-out)",
                )
            )
    comparison_csv = (
        write_comparison_csv(compared, chosen_reference, out_dir / "comparison.csv") if chosen_reference else None
    )
    if comparison_csv is not None:
        sections += (
            "\nEvery comparison, with each seed's difference and the interval's ends: "
            "[comparison.csv](comparison.csv).\n"
        )
    sections += "\n".join(provenance_section(jobs))
    markdown.write_text(sections)
    return Report(markdown, figure, runs_csv, style, metric, jobs, comparison_csv, chosen_reference)


def held_out_sentence(jobs: Sequence[Job], held_out: bool) -> str:
    """What this report says about the held-out split: true whether or not its scores are shown."""
    n, runs, unlisted = scoring_counts(jobs)
    old = (
        f" {unlisted} run(s) also have an evaluations.jsonl from before run.json listed scorings (not counted)."
        if unlisted
        else ""
    )
    if held_out:
        return (
            f'This report shows held-out scores (section "Held-out scores"): run.json lists {n} held-out '
            f"scoring(s) of {runs} run(s).{old}"
        )
    if n or unlisted:
        return (
            f"Held-out scores exist but are not shown: run.json lists {n} held-out scoring(s) of {runs} run(s) "
            f"(`--held-out` shows them); this report read none of them.{old}"
        )
    return "No run has been scored on the held-out split; this report reads no held-out score."


def sweep_title(sweep_dir: Path, jobs: Sequence[Job]) -> str:
    """The experiment every run shares (`experiment=X` in each job's overrides), else the folder's name: a sweep
    collected into a folder such as runs/ keeps the name of what it ran."""
    shared = shared_overrides([job.overrides for job in jobs])
    experiments = [o.partition("=")[2] for o in shared if override_key(o) == "experiment"]
    return experiments[0] if experiments else sweep_dir.name


def render_markdown(
    sweep_dir: Path,
    jobs: Sequence[Job],
    table: str,
    style: str,
    metric_label: str,
    held_out: bool,
    title: str,
    has_curves: bool,
) -> str:
    counts = Counter(job.status for job in jobs)
    status_line = ", ".join(f"{n} {status}" for status, n in counts.most_common())
    what = (
        f"best {metric_label} of each run (the lowest over its scoring steps), per seed"
        if style == "seeds"
        else f"{metric_label} at each scoring step (columns), one row per run"
    )
    shared = shared_overrides(list(variants(jobs)))
    lines = [
        f"# Sweep report: {title}",
        "",
        f"{len(jobs)} run{'s' if len(jobs) != 1 else ''} ({status_line}) in `{sweep_dir}`, from their run records "
        "(run.json). " + held_out_sentence(jobs, held_out),
        "",
        f"Table: {what}. Variants are the runs' overrides minus `seed`"
        + (f"; every run shares `{' '.join(shared)}`." if shared else "."),
        "",
        table,
        "",
    ]
    if any(job.status != "finished" for job in jobs):
        lines += [
            f"`{UNFINISHED_MARK}`: from a run that has not finished (rerun the sweep's command to resume it); "
            "unfinished runs enter no mean. `pruned`: stopped early by its search's pruner. `missing`: never started; "
            "`no record`: stopped before training "
            "(its folder's log says why); `failed`: see run.json's error.",
            "",
        ]
    if style == "seeds" and has_curves:
        lines += ["Mean and spread (max − min) over the finished seeds.", ""]
    if has_curves:
        lines += ["![validation curves](curves.png)", ""]
    lines += [
        "Every validation point of every run, with its best and final metrics: [runs.csv](runs.csv) "
        "(one row per run and validation step).",
        "",
    ]
    return "\n".join(lines)


def write_runs_csv(jobs: Sequence[Job], path: Path) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS + POINT_COLUMNS)
        writer.writeheader()
        for job in jobs:
            record = job.record or {}
            best, final = record.get("best") or {}, record.get("final") or {}
            run = {
                "job": job.name,
                "variant": " ".join(job.variant),
                "seed": job.seed,
                "status": job.status,
                "parameters": record.get("parameters"),
                "step": record.get("step"),
                "best_step": best.get("step"),
                "best_dev_loss": best.get(DEV_LOSS),
                "best_dev_bpb": best.get(DEV_BITS_PER_BYTE),
                "final_step": final.get("step"),
                "final_dev_loss": final.get(DEV_LOSS),
                "final_dev_bpb": final.get(DEV_BITS_PER_BYTE),
                "final_train_loss": final.get("train_loss"),
                "wall_time_s": record.get("wall_time_s"),
                "folder": str(job.path) if job.path else "",
            }
            points = sorted(record.get("curve") or [], key=lambda p: p["step"])
            for point in points or [{}]:
                writer.writerow(
                    {
                        **run,
                        "val_step": point.get("step"),
                        "dev_loss": point.get(DEV_LOSS),
                        "dev_bpb": point.get(DEV_BITS_PER_BYTE),
                        "dev_bits_per_token": point.get("dev_bits_per_token"),
                        "dev_bits_per_char": point.get("dev_bits_per_char"),
                        "train_loss": point.get("train_loss"),
                    }
                )
    return path
