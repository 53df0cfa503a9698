"""μTransfer's reading of a sweep over width × learning rate × parametrization: does the best learning rate move?

Why its own page: the sweep report's table (one row per run) answers "which run is best"; μTransfer asks how each
(parametrization, width)'s curve of dev bits per byte against learning rate sits against the others: where its
minimum is, and what training a wide model at the small model's best rate costs. Tensor Programs V's Figure 1 is
that plot, one panel per parametrization, one line per width.

Everything is read from the report's runs.csv (one row per validation point of each run), so the committed CSV
alone reproduces the page (tests/test_results_doc.py recomputes it). A run's score is its final dev bits per byte;
a run that stopped on a non-finite loss (a learning rate too large) is "diverged" and counts as worse than any
finished run at that width; a point is the mean over the seeds, drawn only when every seed of it finished.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

WIDTH, PARAMETRIZATION, LR = "model.d_model", "model.parametrization", "lr"


@dataclass(frozen=True)
class Run:
    parametrization: str
    width: int
    lr: float
    seed: int
    status: str
    dev_bpb: float | None  # the final dev bits per byte; None unless finished


def read_runs(runs_csv: Path) -> list[Run]:
    """One Run per job of runs.csv (its rows repeat a run's columns on each validation point)."""
    runs: dict[str, Run] = {}
    with open(runs_csv, newline="") as f:
        for row in csv.DictReader(f):
            if row["job"] in runs:
                continue
            overrides = dict(token.split("=", 1) for token in row["variant"].split())
            final = row["final_dev_bpb"]
            runs[row["job"]] = Run(
                parametrization=overrides.get(PARAMETRIZATION, "sp"),
                width=int(overrides[WIDTH]),
                lr=float(overrides[LR]),
                seed=int(row["seed"]),
                status=row["status"],
                dev_bpb=float(final) if row["status"] == "finished" and final else None,
            )
    return list(runs.values())


def curves(runs: list[Run]) -> dict[tuple[str, int], dict[float, float]]:
    """(parametrization, width) -> {lr: mean final dev bits per byte over the seeds}; a learning rate whose every
    seed finished, or +inf when every seed that ended ended diverged (status 'failed')."""
    by_point: dict[tuple[str, int, float], list[Run]] = defaultdict(list)
    for run in runs:
        by_point[(run.parametrization, run.width, run.lr)].append(run)
    seeds = {run.seed for run in runs}
    out: dict[tuple[str, int], dict[float, float]] = defaultdict(dict)
    for (parametrization, width, lr), point in by_point.items():
        if len(point) < len(seeds):
            continue
        if all(run.dev_bpb is not None for run in point):
            out[(parametrization, width)][lr] = statistics.mean(run.dev_bpb for run in point)
        elif all(run.status == "failed" for run in point if run.dev_bpb is None) and any(
            run.status == "failed" for run in point
        ):
            out[(parametrization, width)][lr] = math.inf
    return {key: dict(sorted(values.items())) for key, values in sorted(out.items())}


def best(curve: dict[float, float]) -> tuple[float, float]:
    """The learning rate with the lowest mean dev bits per byte, and that score."""
    lr = min(curve, key=lambda x: (curve[x], x))
    return lr, curve[lr]


def summary(runs: list[Run]) -> dict:
    """What the page states: each (parametrization, width)'s best learning rate and score, the best rate's spread
    across widths in grid steps (log2), whether a best sits at the grid's edge, and, for each width, the cost of
    training it at the smallest width's best rate instead of its own."""
    table = curves(runs)
    grid = sorted({run.lr for run in runs})
    out: dict = {"grid": grid, "seeds": sorted({run.seed for run in runs}), "parametrizations": {}}
    for parametrization in sorted({p for p, _ in table}):
        widths = sorted(w for p, w in table if p == parametrization)
        rows = {}
        for width in widths:
            lr, score = best(table[(parametrization, width)])
            rows[width] = {
                "best_lr": lr,
                "best_dev_bpb": score,
                "at_grid_edge": lr in (grid[0], grid[-1]),
                "points": len(table[(parametrization, width)]),
            }
        base_lr = rows[widths[0]]["best_lr"]
        for width in widths:
            at_base = table[(parametrization, width)].get(base_lr)
            rows[width]["dev_bpb_at_base_lr"] = at_base
            rows[width]["cost_of_base_lr"] = None if at_base is None else at_base - rows[width]["best_dev_bpb"]
        lrs = [rows[w]["best_lr"] for w in widths]
        out["parametrizations"][parametrization] = {
            "widths": {str(w): rows[w] for w in widths},
            "best_lr_spread_steps": round(math.log2(max(lrs) / min(lrs))),
            "best_lr_drift_steps": round(math.log2(lrs[-1] / lrs[0])),  # widest minus narrowest, in grid steps
        }
    return out


def markdown(result: dict) -> str:
    lines = ["## μTransfer: the best learning rate per width", ""]
    if not result["parametrizations"]:
        return "\n".join([*lines, "No learning rate has every seed finished yet.", ""])
    lines.append(
        "Final dev bits per byte, mean over seeds " + ", ".join(map(str, result["seeds"])) + "; the learning-rate "
        "grid " + ", ".join(f"{lr:g}" for lr in result["grid"]) + ". '(edge)': the best is at the grid's end."
    )
    lines += ["", "| parametrization | width | best lr | dev bpb there | at the narrowest width's best lr | cost |"]
    lines.append("| --- | ---: | ---: | ---: | ---: | ---: |")
    for parametrization, entry in result["parametrizations"].items():
        for width, row in entry["widths"].items():
            edge = " (edge)" if row["at_grid_edge"] else ""
            at_base = "—" if row["dev_bpb_at_base_lr"] is None else f"{row['dev_bpb_at_base_lr']:.3f}"
            cost = "—" if row["cost_of_base_lr"] is None else f"{row['cost_of_base_lr']:+.3f}"
            lines.append(
                f"| {parametrization} | {width} | {row['best_lr']:g}{edge} | {row['best_dev_bpb']:.3f} | {at_base} "
                f"| {cost} |"
            )
    lines.append("")
    for parametrization, entry in result["parametrizations"].items():
        lines.append(
            f"- {parametrization}: the best learning rate spans {entry['best_lr_spread_steps']} grid step(s) across "
            f"the widths; widest minus narrowest: {entry['best_lr_drift_steps']:+d} step(s)."
        )
    return "\n".join(lines) + "\n"


def plot(runs: list[Run], path: Path) -> bool:
    """Tensor Programs V's Figure 1: dev bits per byte against learning rate, one panel per parametrization, one
    line per width (mean over seeds; a diverged point left out), each width's best marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = curves(runs)
    parametrizations = sorted({p for p, _ in table})
    if not parametrizations:
        return False
    widths = sorted({w for _, w in table})
    finite = [v for c in table.values() for v in c.values() if math.isfinite(v)]
    fig, axes = plt.subplots(1, len(parametrizations), figsize=(5.5 * len(parametrizations), 4.2), sharey=True)
    axes = [axes] if len(parametrizations) == 1 else list(axes)
    colours = plt.get_cmap("viridis")
    for ax, parametrization in zip(axes, parametrizations, strict=True):
        for i, width in enumerate(widths):
            curve = {lr: v for lr, v in table.get((parametrization, width), {}).items() if math.isfinite(v)}
            if not curve:
                continue
            colour = colours(i / max(1, len(widths) - 1))
            ax.plot(list(curve), list(curve.values()), marker="o", ms=3, color=colour, label=f"width {width}")
            lr, score = best(curve)
            ax.plot([lr], [score], marker="*", ms=12, color=colour)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("learning rate")
        ax.set_title(parametrization)
        ax.grid(alpha=0.3)
        if finite:
            low = min(finite)
            ax.set_ylim(low - 0.05, min(max(finite), low + 2.0))
    axes[0].set_ylabel("dev bits per byte (final, mean over seeds)")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_transfer(runs_csv: Path, out_dir: Path) -> list[Path]:
    """transfer.json (summary()), transfer.md and transfer.png beside the report, from its runs.csv."""
    runs = read_runs(runs_csv)
    result = summary(runs)
    paths = [out_dir / "transfer.json", out_dir / "transfer.md", out_dir / "transfer.png"]
    paths[0].write_text(json.dumps(result, indent=2) + "\n")
    paths[1].write_text(markdown(result))
    return paths if plot(runs, paths[2]) else paths[:2]
