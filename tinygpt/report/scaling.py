"""Scaling-law fits of an isoFLOP sweep: which size a compute budget should buy, and the loss a larger budget reaches.

From runs that each spent a budget C on a model of N parameters and D tokens (run.json's ``budget``,
tinygpt/train/budget.py) and scored a final dev loss L:

- **Approach 2** (Hoffmann et al. 2022): per budget, L against log N is fitted with a parabola; its minimum is
  N_opt(C), and D_opt(C) is read off the same budget's runs (log D is linear in log N along a budget) at N_opt.
  Intervals: a residual bootstrap of each parabola (resampling five points in pairs leaves many samples with no
  minimum at all, which says nothing about where the minimum is).
- **The exponents**: N_opt ∝ C^a and D_opt ∝ C^b, least squares in log-log space (scipy.stats.linregress), with
  t intervals on the slopes.
- **Approach 3**: L(N, D) = E + A/N^α + B/D^β, fitted as Hoffmann et al. describe and Besiroglu et al. (2024)
  correct: a Huber loss (δ = 10⁻³) between log L and the log-sum-exp form of the model's log, minimised with
  L-BFGS-B from every point of a grid of initialisations, the best kept (without stopping at the optimiser's
  default tolerance, which is what left the original fit's reported parameters off); bootstrap intervals on every
  parameter by refitting resampled runs; the tokens per parameter at the compute-optimal allocation (C = 6ND).
- **A held-out prediction**: every fit again without the largest budget, its best loss and N_opt predicted there,
  and the errors against what the largest budget's runs measured.

Every number goes into scaling.json; scaling.md states them; scaling.png draws the isoFLOP curves with their
parabolas and minima, and the frontier N_opt(C) with its power law.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import optimize, special, stats

HUBER_DELTA = 1e-3
# Hoffmann et al.'s grid of initialisations (their Appendix D.2): α, β, e over a coarse grid, a and b (log A, log B)
GRID = {
    "a": np.arange(0.0, 30.0, 5.0),
    "b": np.arange(0.0, 30.0, 5.0),
    "e": np.arange(-1.0, 1.5, 0.5),
    "alpha": np.arange(0.0, 2.5, 0.5),
    "beta": np.arange(0.0, 2.5, 0.5),
}
BOOTSTRAP = 200  # resamples for every interval
LEVEL = 0.95


@dataclass(frozen=True)
class Point:
    flops: float  # the budget the run was given (its group)
    parameters: int  # N
    tokens: int  # D
    loss: float  # final dev loss, nats per token


def points_from_records(records: list[dict]) -> list[Point]:
    """The finished runs with a budget: (C, N, D, final dev loss) from each run.json."""
    out = []
    for record in records:
        spent, final = record.get("budget"), record.get("final") or {}
        if record.get("status") != "finished" or not spent or final.get("dev_loss") is None:
            continue
        out.append(
            Point(float(spent["flops"]), int(spent["parameters"]), int(spent["tokens"]), float(final["dev_loss"]))
        )
    return out


def _interval(samples: np.ndarray) -> list[float]:
    samples = samples[np.isfinite(samples)]
    if samples.size == 0:
        return [math.nan, math.nan]
    tail = 100 * (1 - LEVEL) / 2
    return [float(np.percentile(samples, tail)), float(np.percentile(samples, 100 - tail))]


# ---- Approach 2 --------------------------------------------------------------------------------------------------


def parabola_minimum(log_n: np.ndarray, loss: np.ndarray) -> tuple[float, float, np.ndarray]:
    """(log N at the minimum, the loss there, the coefficients) of the least-squares parabola; nan where it opens
    downwards (no minimum)."""
    coefficients = np.polyfit(log_n, loss, 2)
    a, b, _ = coefficients
    if a <= 0:
        return math.nan, math.nan, coefficients
    x = -b / (2 * a)
    return float(x), float(np.polyval(coefficients, x)), coefficients


def approach2(points: list[Point], seed: int = 0) -> dict[float, dict]:
    """Per budget: N_opt, D_opt and the loss at the minimum, with residual-bootstrap intervals on N_opt and D_opt."""
    rng = np.random.default_rng(seed)
    out = {}
    for flops in sorted({p.flops for p in points}):
        group = sorted((p for p in points if p.flops == flops), key=lambda p: p.parameters)
        if len({p.parameters for p in group}) < 3:
            continue
        log_n = np.log(np.array([p.parameters for p in group], dtype=float))
        log_d = np.log(np.array([p.tokens for p in group], dtype=float))
        loss = np.array([p.loss for p in group])
        x, best, coefficients = parabola_minimum(log_n, loss)
        tokens_line = np.polyfit(log_n, log_d, 1)  # along a budget, log D falls linearly in log N
        fitted = np.polyval(coefficients, log_n)
        residuals = loss - fitted
        draws = np.array(
            [parabola_minimum(log_n, fitted + rng.choice(residuals, residuals.size))[0] for _ in range(BOOTSTRAP)]
        )
        out[flops] = {
            "n_opt": math.exp(x) if math.isfinite(x) else math.nan,
            "n_opt_interval": [math.exp(v) for v in _interval(draws)],
            "d_opt": math.exp(np.polyval(tokens_line, x)) if math.isfinite(x) else math.nan,
            "d_opt_interval": [math.exp(np.polyval(tokens_line, v)) for v in _interval(draws)],
            "loss_at_opt": best,
            "best_observed_loss": float(loss.min()),
            "coefficients": [float(c) for c in coefficients],
            "runs": len(group),
        }
    return out


def exponents(per_budget: dict[float, dict]) -> dict:
    """N_opt ∝ C^a and D_opt ∝ C^b in log-log space, each with its t interval (scipy.stats.linregress)."""
    budgets = [c for c, v in per_budget.items() if math.isfinite(v["n_opt"])]
    out = {}
    if len(budgets) < 2:
        return out
    log_c = np.log(budgets)
    for name, key in (("a", "n_opt"), ("b", "d_opt")):
        y = np.log([per_budget[c][key] for c in budgets])
        fit = stats.linregress(log_c, y)
        half = stats.t.ppf(0.5 + LEVEL / 2, len(budgets) - 2) * fit.stderr if len(budgets) > 2 else math.nan
        out[name] = {
            "exponent": float(fit.slope),
            "interval": [float(fit.slope - half), float(fit.slope + half)],
            "log_coefficient": float(fit.intercept),
        }
    return out


# ---- Approach 3 --------------------------------------------------------------------------------------------------


def _objective(
    theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_loss: np.ndarray
) -> tuple[float, np.ndarray]:
    """The Huber loss of log L against log(E + A/N^α + B/D^β), and its gradient in (a, b, e, α, β): the log-sum-exp's
    derivatives are its softmax weights, the Huber's the residual clipped to ±δ."""
    a, b, e, alpha, beta = theta
    terms = np.stack([a - alpha * log_n, b - beta * log_d, np.full_like(log_n, e)])
    predicted = special.logsumexp(terms, axis=0)
    residual = predicted - log_loss
    weights = special.softmax(terms, axis=0)
    slope = np.clip(residual, -HUBER_DELTA, HUBER_DELTA)
    gradient = np.array(
        [
            (slope * weights[0]).sum(),
            (slope * weights[1]).sum(),
            (slope * weights[2]).sum(),
            -(slope * weights[0] * log_n).sum(),
            -(slope * weights[1] * log_d).sum(),
        ]
    )
    return float(special.huber(HUBER_DELTA, residual).sum()), gradient


def fit_approach3(points: list[Point], starts: list[np.ndarray] | None = None) -> dict:
    """E, A, B, α, β minimising the Huber loss on log L, from every start (default: GRID), the best kept."""
    log_n = np.log([p.parameters for p in points])
    log_d = np.log([p.tokens for p in points])
    log_loss = np.log([p.loss for p in points])
    starts = starts if starts is not None else [np.array(s) for s in itertools.product(*GRID.values())]
    best = None
    for start in starts:
        result = optimize.minimize(
            _objective,
            start,
            args=(log_n, log_d, log_loss),
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": 10_000, "ftol": 1e-15, "gtol": 1e-12},
        )
        if best is None or result.fun < best.fun:
            best = result
    a, b, e, alpha, beta = best.x
    return {"E": math.exp(e), "A": math.exp(a), "B": math.exp(b), "alpha": alpha, "beta": beta, "objective": best.fun}


def compute_optimal(fit: dict, flops: float) -> tuple[float, float]:
    """(N_opt, D_opt) minimising L(N, D) under C = 6ND (Hoffmann et al.'s eq. 4)."""
    alpha, beta, A, B = fit["alpha"], fit["beta"], fit["A"], fit["B"]
    g = (alpha * A / (beta * B)) ** (1 / (alpha + beta))
    n = g * (flops / 6) ** (beta / (alpha + beta))
    return n, flops / (6 * n)


def loss_of(fit: dict, n: float, d: float) -> float:
    return fit["E"] + fit["A"] / n ** fit["alpha"] + fit["B"] / d ** fit["beta"]


def approach3(points: list[Point], budgets: list[float], seed: int = 0) -> dict:
    """Approach 3's parameters with bootstrap intervals (runs resampled with replacement, each refit from the full
    fit's parameters and a small grid around them), and the tokens per parameter at each budget's optimum."""
    fit = fit_approach3(points)
    rng = np.random.default_rng(seed)
    around = [
        np.array([math.log(fit["A"]), math.log(fit["B"]), math.log(fit["E"]), fit["alpha"], fit["beta"]]) + shift
        for shift in ([0, 0, 0, 0, 0], [1, 1, 0, 0.1, 0.1], [-1, -1, 0, -0.1, -0.1])
    ]
    names = ("E", "A", "B", "alpha", "beta")
    draws = {name: [] for name in names}
    for _ in range(BOOTSTRAP):
        sample = [points[i] for i in rng.integers(0, len(points), len(points))]
        refit = fit_approach3(sample, around)
        for name in names:
            draws[name].append(refit[name])
    optimum = {}
    for flops in budgets:
        n, d = compute_optimal(fit, flops)
        optimum[f"{flops:g}"] = {"n_opt": n, "d_opt": d, "tokens_per_parameter": d / n, "loss": loss_of(fit, n, d)}
    return {
        **{name: float(fit[name]) for name in names},
        "intervals": {name: _interval(np.array(draws[name])) for name in names},
        "huber_objective": float(fit["objective"]),
        "optimum": optimum,
    }


# ---- held out, report --------------------------------------------------------------------------------------------


def held_out(points: list[Point], seed: int = 0) -> dict:
    """Fit without the largest budget, predict it: N_opt from the exponent a, the best loss from Approach 3 (at its
    compute-optimal allocation) and from the smaller budgets' Approach 2 minima extrapolated in log C; the errors
    against the largest budget's own Approach 2 fit and best observed run."""
    largest = max(p.flops for p in points)
    train = [p for p in points if p.flops != largest]
    measured = approach2([p for p in points if p.flops == largest], seed)[largest]
    fitted = approach2(train, seed)
    law = exponents(fitted)
    n_predicted = math.exp(law["a"]["log_coefficient"] + law["a"]["exponent"] * math.log(largest))
    fit3 = fit_approach3(train)
    n3, d3 = compute_optimal(fit3, largest)
    loss3 = loss_of(fit3, n3, d3)
    return {
        "held_out_budget": largest,
        "n_opt_predicted": n_predicted,
        "n_opt_measured": measured["n_opt"],
        "n_opt_error_ratio": n_predicted / measured["n_opt"],
        "loss_predicted_approach3": loss3,
        "loss_measured_best": measured["best_observed_loss"],
        "loss_measured_at_opt": measured["loss_at_opt"],
        "loss_error": loss3 - measured["loss_at_opt"],
    }


def analyse(points: list[Point], seed: int = 0) -> dict:
    per_budget = approach2(points, seed)
    budgets = sorted(per_budget)
    return {
        "runs": len(points),
        "budgets": budgets,
        "approach2": {f"{c:g}": v for c, v in per_budget.items()},
        "exponents": exponents(per_budget),
        "approach3": approach3(points, budgets, seed),
        "held_out": held_out(points, seed) if len(budgets) >= 3 else None,
    }


def markdown(result: dict) -> str:
    lines = ["# Scaling: which model for the budget", ""]
    lines += ["## Approach 2: the minimum of each isoFLOP curve", ""]
    lines += ["| budget (FLOPs) | runs | N_opt [95%] | D_opt [95%] | loss at the minimum | best run |"]
    lines += ["| ---: | ---: | --- | --- | ---: | ---: |"]
    for c, v in result["approach2"].items():
        n_lo, n_hi = v["n_opt_interval"]
        d_lo, d_hi = v["d_opt_interval"]
        lines.append(
            f"| {c} | {v['runs']} | {v['n_opt']:,.0f} [{n_lo:,.0f}, {n_hi:,.0f}] | {v['d_opt']:,.0f} "
            f"[{d_lo:,.0f}, {d_hi:,.0f}] | {v['loss_at_opt']:.4f} | {v['best_observed_loss']:.4f} |"
        )
    law = result["exponents"]
    if law:
        lines += ["", "## The exponents", ""]
        for name, what in (("a", "N_opt ∝ C^a"), ("b", "D_opt ∝ C^b")):
            lo, hi = law[name]["interval"]
            lines.append(f"- {what}: {name} = {law[name]['exponent']:.3f}, 95% interval [{lo:.3f}, {hi:.3f}]")
    fit = result["approach3"]
    lines += ["", "## Approach 3: L(N, D) = E + A/N^α + B/D^β", ""]
    lines += ["| parameter | fit | 95% bootstrap interval |", "| --- | ---: | --- |"]
    for name in ("E", "A", "B", "alpha", "beta"):
        lo, hi = fit["intervals"][name]
        lines.append(f"| {name} | {fit[name]:.4g} | [{lo:.4g}, {hi:.4g}] |")
    lines += [
        "",
        "| budget | N_opt | D_opt | tokens per parameter | predicted loss |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for c, v in fit["optimum"].items():
        lines.append(
            f"| {c} | {v['n_opt']:,.0f} | {v['d_opt']:,.0f} | {v['tokens_per_parameter']:.1f} | {v['loss']:.4f} |"
        )
    held = result["held_out"]
    if held:
        lines += [
            "",
            f"## Held out: the largest budget, {held['held_out_budget']:g} FLOPs, predicted from the others",
            "",
        ]
        lines.append(
            f"- N_opt: predicted {held['n_opt_predicted']:,.0f}, measured {held['n_opt_measured']:,.0f} "
            f"(ratio {held['n_opt_error_ratio']:.2f})"
        )
        lines.append(
            f"- loss at the optimum: predicted {held['loss_predicted_approach3']:.4f} (Approach 3), measured "
            f"{held['loss_measured_at_opt']:.4f} (the parabola's minimum; best run {held['loss_measured_best']:.4f}); "
            f"error {held['loss_error']:+.4f}"
        )
    return "\n".join(lines) + "\n"


def plot(points: list[Point], result: dict, path: Path) -> None:
    """Left: loss against N per budget, with each parabola and its minimum; right: N_opt against C with a's law."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    colours = plt.get_cmap("plasma")
    budgets = sorted({p.flops for p in points})
    for i, flops in enumerate(budgets):
        colour = colours(i / max(1, len(budgets) - 1) * 0.85)
        group = sorted((p for p in points if p.flops == flops), key=lambda p: p.parameters)
        left.plot([p.parameters for p in group], [p.loss for p in group], "o", color=colour, label=f"{flops:.0e}")
        fit = result["approach2"].get(f"{flops:g}")
        if fit:
            xs = np.linspace(math.log(group[0].parameters), math.log(group[-1].parameters), 100)
            left.plot(np.exp(xs), np.polyval(fit["coefficients"], xs), "-", color=colour, alpha=0.7)
            if math.isfinite(fit["n_opt"]):
                left.plot([fit["n_opt"]], [fit["loss_at_opt"]], "*", ms=12, color=colour)
    left.set_xscale("log")
    left.set_xlabel("parameters N")
    left.set_ylabel("final dev loss (nats per token)")
    left.set_title("isoFLOP curves")
    left.legend(title="budget", fontsize=8)
    frontier = [(float(c), v["n_opt"]) for c, v in result["approach2"].items() if math.isfinite(v["n_opt"])]
    if frontier:
        right.plot(*zip(*frontier, strict=True), "o", label="Approach 2 minima")
        law = result["exponents"].get("a")
        if law:
            cs = np.geomspace(min(budgets), max(budgets) * 3, 50)
            right.plot(
                cs, np.exp(law["log_coefficient"]) * cs ** law["exponent"], "-", label=f"C^{law['exponent']:.2f}"
            )
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("compute C (FLOPs)")
    right.set_ylabel("N_opt")
    right.set_title("the frontier")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_scaling(records: list[dict], out_dir: Path, seed: int = 0) -> list[Path]:
    points = points_from_records(records)
    result = analyse(points, seed)
    paths = [out_dir / "scaling.json", out_dir / "scaling.md", out_dir / "scaling.png"]
    paths[0].write_text(json.dumps(result, indent=2) + "\n")
    paths[1].write_text(markdown(result))
    plot(points, result, paths[2])
    return paths
