"""The validation curves of a sweep, as in 000's figure: one colour per variant, one line per seed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from tinygpt.report.jobs import FINISHED, Job
from tinygpt.report.tables import Metric, curve, variant_labels, variants


def plot_curves(
    jobs: Sequence[Job],
    metric: Metric,
    path: Path,
    title: str,
    points_of: Callable[[Job, Metric], dict[int, float]] = curve,
    ymax: float | None = None,
) -> Path:
    """points_of(job, metric) gives a run's {step: value}: by default its validation curve from run.json.
    ymax: cut the axis off there (000's figure cuts at 7.7 so the early plateau does not flatten the rest)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed, and none on a cluster
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    groups = variants(jobs)
    labels = variant_labels(list(groups))
    colours = plt.get_cmap("tab10" if len(groups) <= 10 else "tab20")
    figure, axes = plt.subplots(figsize=(8, 5))
    for i, (key, group) in enumerate(groups.items()):
        labelled = False
        for job in group:
            points = sorted(points_of(job, metric).items())
            if not points:
                continue
            steps, values = [s for s, _ in points], [v for _, v in points]
            # unfinished and failed runs dashed, so a short line is not read as a finished one
            axes.plot(
                steps,
                values,
                color=colours(i % colours.N),
                marker=".",
                linewidth=1.2,
                alpha=0.85,
                linestyle="-" if job.status == FINISHED else "--",
                label=None if labelled else labels[key],
            )
            labelled = True
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    axes.set_xlabel("training step")
    axes.set_ylabel(metric.label)
    if ymax is not None:
        axes.set_ylim(top=ymax)
    if any(job.status != FINISHED and points_of(job, metric) for job in jobs):
        title += " (dashed: not finished)"
    axes.set_title(title)
    axes.grid(alpha=0.3)
    if axes.lines:
        axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
