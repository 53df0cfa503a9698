"""The validation curves of a sweep: one colour per variant, its seeds' mean with their min–max band.

With several finished seeds a variant is drawn as the mean over its seeds at each step, with a band from the
lowest to the highest seed, so the seed noise that decides how the table may be read is on the figure (000: "the
seed-to-seed spread within a row is about 0.05 to 0.1"). A variant with one finished seed is its one line.
The reference variant (tinygpt/report/comparisons.py) is dashed; runs that have not finished are dotted lines of
their own, never part of a mean. The y axis shows every point unless ``ymax`` cuts it, which the title states.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from tinygpt.report.jobs import FINISHED, Job
from tinygpt.report.tables import Metric, curve, variant_labels, variants


def seed_band(curves: Sequence[dict[int, float]]) -> tuple[list[int], list[float], list[float], list[float]]:
    """(steps, mean, min, max) over the runs' curves, at each step every run has a point for."""
    steps = sorted(set.intersection(*(set(points) for points in curves))) if curves else []
    columns = [[points[step] for points in curves] for step in steps]
    return steps, [statistics.fmean(c) for c in columns], [min(c) for c in columns], [max(c) for c in columns]


def plot_curves(
    jobs: Sequence[Job],
    metric: Metric,
    path: Path,
    title: str,
    points_of: Callable[[Job, Metric], dict[int, float]] = curve,
    ymax: float | None = None,
    reference: tuple[str, ...] | None = None,
) -> Path:
    """points_of(job, metric) gives a run's {step: value}: by default its validation curve from run.json.
    ymax: cut the axis off there (000's figure cuts at 7.7 so the early plateau does not flatten the rest).
    reference: the variant drawn dashed."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed, and none on a cluster
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    groups = variants(jobs)
    labels = variant_labels(list(groups))
    colours = plt.get_cmap("tab10" if len(groups) <= 10 else "tab20")
    figure, axes = plt.subplots(figsize=(8, 5))
    banded = unfinished = False
    for i, (key, group) in enumerate(groups.items()):
        colour = colours(i % colours.N)
        style = "--" if key == reference else "-"
        label = labels[key] + (" (reference)" if key == reference else "")
        finished = [points for job in group if job.status == FINISHED and (points := points_of(job, metric))]
        steps, mean, low, high = seed_band(finished)
        if len(finished) > 1 and steps:
            axes.fill_between(steps, low, high, color=colour, alpha=0.2, linewidth=0)
            axes.plot(steps, mean, color=colour, linestyle=style, marker=".", linewidth=1.5, label=label)
            banded = True
        elif finished:
            points = sorted(finished[0].items())
            axes.plot(
                [s for s, _ in points],
                [v for _, v in points],
                color=colour,
                linestyle=style,
                marker=".",
                linewidth=1.5,
                label=label,
            )
        labelled = bool(finished)
        for job in group:
            points = sorted(points_of(job, metric).items()) if job.status != FINISHED else []
            if points:
                axes.plot(
                    [s for s, _ in points],
                    [v for _, v in points],
                    color=colour,
                    linestyle=":",
                    marker=".",
                    linewidth=1.0,
                    alpha=0.8,
                    label=None if labelled else label,
                )
                labelled = unfinished = True
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    axes.set_xlabel("training step")
    axes.set_ylabel(metric.label)
    notes = []
    if banded:
        notes.append("line: mean over seeds, band: min–max")
    if unfinished:
        notes.append("dotted: not finished")
    if ymax is not None:
        axes.set_ylim(top=ymax)
        notes.append(f"axis cut at {ymax:g}")
    axes.set_title(title + (f"\n({'; '.join(notes)})" if notes else ""), fontsize="medium")
    axes.grid(alpha=0.3)
    if axes.lines:
        axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
