"""Scaling-law fits (tinygpt/report/scaling.py) on points drawn from a known law: Approach 3 recovers its
parameters, Approach 2's minima and exponents land where the law puts them, the held-out budget is predicted."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import optimize

from tinygpt.report import scaling
from tinygpt.report.scaling import Point

TRUE = {"E": 1.2, "A": 300.0, "B": 2000.0, "alpha": 0.35, "beta": 0.4}
BUDGETS = (1e13, 3e13, 1e14, 3e14)
SMALL_GRID = [np.array([a, b, e, 0.5, 0.5]) for a in (3.0, 8.0) for b in (5.0, 10.0) for e in (-0.5, 0.5)]


def law(n, d):
    return TRUE["E"] + TRUE["A"] / n ** TRUE["alpha"] + TRUE["B"] / d ** TRUE["beta"]


def isoflop_points(noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for c in BUDGETS:
        for n in true_optimum(c) * np.geomspace(1 / 4, 4, 7):  # each budget's sizes around its optimum
            d = c / (6 * n)
            out.append(Point(c, int(n), int(d), law(n, d) * (1 + noise * rng.standard_normal())))
    return out


def true_optimum(c):
    """N minimising the law along C = 6ND, numerically."""
    result = optimize.minimize_scalar(
        lambda x: law(math.exp(x), c / (6 * math.exp(x))), bounds=(5, 25), method="bounded"
    )
    return math.exp(result.x)


def test_approach3_recovers_the_law_it_was_drawn_from():
    fit = scaling.fit_approach3(isoflop_points(), SMALL_GRID)
    for name, value in TRUE.items():
        assert fit[name] == pytest.approx(value, rel=1e-3), name
    n, d = scaling.compute_optimal(fit, 1e14)
    assert n == pytest.approx(true_optimum(1e14), rel=1e-2) and n * d * 6 == pytest.approx(1e14)


def test_approach2_minima_and_the_exponents():
    per_budget = scaling.approach2(isoflop_points())
    for c in BUDGETS:
        assert per_budget[c]["n_opt"] == pytest.approx(true_optimum(c), rel=0.1)
        lo, hi = per_budget[c]["n_opt_interval"]
        assert lo <= hi
    law_fit = scaling.exponents(per_budget)
    expected_a = TRUE["beta"] / (TRUE["alpha"] + TRUE["beta"])  # N_opt ∝ C^(β/(α+β)) under C = 6ND
    assert law_fit["a"]["exponent"] == pytest.approx(expected_a, abs=0.03)
    assert law_fit["a"]["exponent"] + law_fit["b"]["exponent"] == pytest.approx(1.0, abs=0.02)  # C = 6ND


def test_the_largest_budget_held_out_is_predicted(monkeypatch):
    monkeypatch.setattr(scaling, "GRID", {"a": [3.0, 8.0], "b": [5.0, 10.0], "e": [0.0], "alpha": [0.5], "beta": [0.5]})
    held = scaling.held_out(isoflop_points())
    assert held["held_out_budget"] == 3e14
    assert held["n_opt_error_ratio"] == pytest.approx(1.0, abs=0.15)
    assert abs(held["loss_error"]) < 0.01


def test_noisy_points_give_intervals_that_hold_the_truth(monkeypatch):
    monkeypatch.setattr(scaling, "GRID", {"a": [3.0, 8.0], "b": [5.0, 10.0], "e": [0.0], "alpha": [0.5], "beta": [0.5]})
    monkeypatch.setattr(scaling, "BOOTSTRAP", 20)
    points = isoflop_points(noise=0.002, seed=1)
    fit = scaling.approach3(points, list(BUDGETS))
    lo, hi = fit["intervals"]["E"]
    assert lo < hi and lo - 0.05 < TRUE["E"] < hi + 0.05
    assert fit["optimum"]["1e+14"]["tokens_per_parameter"] > 0


def test_write_scaling_reads_run_records_and_writes_json_page_and_figure(tmp_path, monkeypatch):
    monkeypatch.setattr(scaling, "GRID", {"a": [3.0, 8.0], "b": [5.0, 10.0], "e": [0.0], "alpha": [0.5], "beta": [0.5]})
    monkeypatch.setattr(scaling, "BOOTSTRAP", 10)
    records = [
        {
            "status": "finished",
            "budget": {"flops": p.flops, "parameters": p.parameters, "tokens": p.tokens},
            "final": {"dev_loss": p.loss},
        }
        for p in isoflop_points()
    ]
    records.append({"status": "failed", "budget": {"flops": 1e13, "parameters": 5, "tokens": 5}, "final": {}})
    records.append({"status": "finished", "final": {"dev_loss": 3.0}})  # a run without a budget: not a point
    paths = scaling.write_scaling(records, tmp_path)
    result = json.loads(paths[0].read_text())
    assert result["runs"] == len(BUDGETS) * 7 and result["budgets"] == list(BUDGETS)
    assert result["approach3"]["alpha"] == pytest.approx(TRUE["alpha"], rel=1e-3)
    assert result["held_out"]["held_out_budget"] == 3e14
    page = paths[1].read_text()
    assert "## Approach 3: L(N, D) = E + A/N^α + B/D^β" in page and "## Held out: the largest budget" in page
    assert paths[2].stat().st_size > 10_000
