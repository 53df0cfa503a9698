"""A search's report: its trials, the best one, what mattered (parameter importances) and Optuna's plots.

``tinygpt-report <search folder>`` writes the usual report of the trials' runs (each trial is a run), and this
section with it: the trials table (number, state, each parameter, the objective, the step it came from or the
step a pruned trial stopped at, why a trial failed), the best trial, fANOVA parameter importances
(``optuna.importance``, over the finished trials) and the optimisation history and slice plots (Optuna's
matplotlib visualisation), plus trials.csv. Only dev scores are read: a search never had a held-out one.
"""

from __future__ import annotations

import csv
import warnings
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import optuna  # noqa: E402
from optuna.trial import TrialState  # noqa: E402

from tinygpt.common.run_folder import read_record  # noqa: E402
from tinygpt.launch.search import override_value, trial_dir  # noqa: E402
from tinygpt.launch.study import load_finished_study  # noqa: E402

HISTORY, SLICE, TRIALS = "search_history.png", "search_slice.png", "trials.csv"
IMPORTANCE_SEED = 0  # fANOVA's random forest


def shown(value) -> str:
    """A parameter as the table shows it: floats to 4 significant digits (trials.csv keeps them whole)."""
    return f"{value:.4g}" if isinstance(value, float) else override_value(value)


@dataclass
class StudySection:
    markdown: str
    files: list[Path]


def trial_row(trial: optuna.trial.FrozenTrial, sweep_dir: Path) -> dict:
    record = read_record(trial_dir(sweep_dir, trial.number)) or {}
    if trial.state == TrialState.PRUNED:
        step = (record.get("pruned") or {}).get("step", trial.last_step)
    else:
        step = (record.get("best") or {}).get("step")
    return {
        "trial": trial.number,
        "state": trial.state.name.lower(),
        **{name: override_value(value) for name, value in trial.params.items()},
        "value": trial.value,
        "step": step,
        "folder": trial_dir(sweep_dir, trial.number).name,
        "note": trial.user_attrs.get("outcome", "") if trial.state != TrialState.COMPLETE else "",
    }


def importances(study: optuna.Study) -> tuple[dict[str, float], str | None]:
    """fANOVA importances over the finished trials, or why there are none. The evaluator is named: Optuna's default
    is PED-ANOVA since 4.x (which the report once printed as fANOVA), and fANOVA's random forest is seeded
    (``IMPORTANCE_SEED``), so the same study always gives the same importances."""
    finished = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(finished) < 2:
        return {}, f"{len(finished)} finished trial(s): importances need at least 2"
    evaluator = optuna.importance.FanovaImportanceEvaluator(seed=IMPORTANCE_SEED)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ranked = optuna.importance.get_param_importances(study, evaluator=evaluator)
            return {name: float(weight) for name, weight in ranked.items()}, None
    except (RuntimeError, ValueError) as err:  # e.g. every finished trial has the same values
        return {}, str(err).splitlines()[0]


def importance_lines(study: optuna.Study) -> list[str]:
    """The report's importances: what was computed, over how many trials, then one line a parameter."""
    ranked, why_not = importances(study)
    trials = study.get_trials(deepcopy=False)
    finished = sum(t.state == TrialState.COMPLETE for t in trials)
    lines = [
        f"Parameter importances (fANOVA, Optuna's `FanovaImportanceEvaluator(seed={IMPORTANCE_SEED})`, over the "
        f"{finished} finished trial(s) of {len(trials)}: pruned and failed trials are not seen; they sum to 1):",
        "",
    ]
    if ranked:
        return lines + [f"- `{name}`: {weight:.3f}" for name, weight in ranked.items()]
    return lines + [f"- none: {why_not}"]


def save_plot(plot, path: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna marks its matplotlib plots experimental
        result = plot()
    figure = (result.flat[0] if hasattr(result, "flat") else result).get_figure()
    figure.set_size_inches(max(6.0, figure.get_size_inches()[0]), 4.5)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)
    return path


def write_study_section(sweep_dir: str | Path, out_dir: str | Path | None = None) -> StudySection:
    sweep_dir = Path(sweep_dir)
    out_dir = Path(out_dir) if out_dir else sweep_dir
    study = load_finished_study(sweep_dir)
    trials = study.get_trials(deepcopy=False)
    rows = [trial_row(t, sweep_dir) for t in trials]
    names = list(dict.fromkeys(n for t in trials for n in t.params))
    columns = ["trial", "state", *names, "value", "step", "folder", "note"]
    with open(out_dir / TRIALS, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    search = study.user_attrs.get("search", {})
    objective = search.get("objective", "objective")
    counts = ", ".join(
        f"{sum(t.state == s for t in trials)} {s.name.lower()}"
        for s in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL, TrialState.RUNNING)
        if any(t.state == s for t in trials)
    )
    lines = [
        f"## Search: study `{study.study_name}`",
        "",
        f"{len(trials)} trials ({counts}) in `{sweep_dir / 'study.db'}`, minimising {objective} (dev). "
        f"Searched: {', '.join(f'`{line}`' for line in search.get('params', {}).values()) or '—'}; every trial: "
        f"{' '.join(f'`{o}`' for o in search.get('fixed', [])) or '—'}.",
        "",
    ]
    try:
        best = study.best_trial
        lines += [
            f"**Best: trial {best.number}** (`{trial_dir(sweep_dir, best.number).name}`), {best.value:.4f}: "
            + ", ".join(f"{k}={shown(v)}" for k, v in best.params.items())
            + f". Register it with `tinygpt-register {sweep_dir} name=<recipe>` before any held-out score.",
            "",
        ]
    except ValueError:
        lines += ["No trial has finished.", ""]
    header = ["Trial", "State", *names, objective, "Step", "Note"]
    lines += ["| " + " | ".join(header) + " |", "| " + " | ".join(["---:"] * len(header)) + " |"]
    for trial, row in zip(trials, rows, strict=True):
        value = f"{row['value']:.4f}" if row["value"] is not None else "—"
        params = [shown(trial.params[n]) if n in trial.params else "—" for n in names]
        cells = [row["trial"], row["state"], *params, value, row["step"] or "—", row["note"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += [
        "",
        f"`pruned`: stopped at `Step` by the pruner; its value is its dev score there. [{TRIALS}]({TRIALS})",
        "",
    ]
    lines += importance_lines(study)
    files = [out_dir / TRIALS]
    if any(t.state == TrialState.COMPLETE for t in trials):
        files.append(
            save_plot(lambda: optuna.visualization.matplotlib.plot_optimization_history(study), out_dir / HISTORY)
        )
        files.append(save_plot(lambda: optuna.visualization.matplotlib.plot_slice(study), out_dir / SLICE))
        lines += ["", f"![optimisation history]({HISTORY})", "", f"![slice plot]({SLICE})"]
    return StudySection("\n".join(lines) + "\n", files)
