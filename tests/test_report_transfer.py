"""μTransfer's reading of a sweep (tinygpt/report/transfer.py), on a runs.csv of known curves: each width's best
learning rate, its spread in grid steps, the cost of the narrowest width's rate, diverged and unfinished runs."""

from __future__ import annotations

import csv
import json
import math

import pytest

from tinygpt.report.report import CSV_COLUMNS, POINT_COLUMNS
from tinygpt.report.transfer import best, curves, read_runs, summary, write_transfer

GRID = [2.0**-k for k in range(12, 4, -1)]  # 2^-12 ... 2^-5
WIDTHS = (64, 128, 256, 512)


def score(parametrization: str, width: int, lr: float, seed: int) -> float:
    """A parabola in log2(lr) whose minimum stays at 2^-8 under mup and moves one step down per doubling under sp."""
    shift = 0 if parametrization == "mup" else math.log2(width / 64)
    centre = -8 - shift
    return 1.5 + 0.1 * (math.log2(lr) - centre) ** 2 - 0.05 * math.log2(width / 64) + 0.001 * seed


def write_runs(path, diverged=(), unfinished=(), absent=()):
    rows = []
    for parametrization in ("sp", "mup"):
        for width in WIDTHS:
            for lr in GRID:
                for seed in (0, 1):
                    key = (parametrization, width, lr)
                    if (key, seed) in absent:  # not in runs.csv at all (another sweep folder's runs.csv)
                        continue
                    status = "failed" if key in diverged else "running" if (key, seed) in unfinished else "finished"
                    value = score(parametrization, width, lr, seed) if status == "finished" else ""
                    variant = (
                        f"experiment=mutransfer lr={lr!r} model.d_model={width} model.parametrization={parametrization}"
                    )
                    row = dict.fromkeys(CSV_COLUMNS + POINT_COLUMNS, "")
                    row |= {"job": f"{variant} seed={seed}", "variant": variant, "seed": seed, "status": status}
                    row |= {"final_dev_bpb": value, "final_step": 500 if value != "" else ""}
                    rows += [row, {**row, "val_step": 500}]  # a run's columns repeat on each of its points
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS + POINT_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_each_widths_best_learning_rate_and_its_spread(tmp_path):
    result = summary(read_runs(write_runs(tmp_path / "runs.csv")))
    mup, sp = result["parametrizations"]["mup"], result["parametrizations"]["sp"]
    assert [mup["widths"][str(w)]["best_lr"] for w in WIDTHS] == [2.0**-8] * 4
    assert [sp["widths"][str(w)]["best_lr"] for w in WIDTHS] == [2.0**-8, 2.0**-9, 2.0**-10, 2.0**-11]
    assert (mup["best_lr_spread_steps"], mup["best_lr_drift_steps"]) == (0, 0)
    assert (sp["best_lr_spread_steps"], sp["best_lr_drift_steps"]) == (3, -3)
    # width 512 under sp at width 64's best rate, 2^-8: three steps from its own, 0.1 * 3^2 worse
    assert sp["widths"]["512"]["cost_of_base_lr"] == pytest.approx(0.9)
    assert mup["widths"]["512"]["cost_of_base_lr"] == 0
    assert sp["widths"]["64"]["best_dev_bpb"] == pytest.approx(1.5005)  # the mean of seeds 0 and 1
    assert not any(row["at_grid_edge"] for entry in (mup, sp) for row in entry["widths"].values())


def test_a_diverged_rate_counts_as_worst_and_an_unfinished_one_is_not_drawn(tmp_path):
    path = write_runs(
        tmp_path / "runs.csv",
        diverged={("sp", 64, 2.0**-8)},
        unfinished={(("mup", 512, 2.0**-8), 1)},
        absent={(("mup", 256, 2.0**-9), 1)},
    )
    table = curves(read_runs(path))
    assert 2.0**-9 not in table[("mup", 256)]  # one seed's mean is not set beside the others' two
    assert table[("sp", 64)][2.0**-8] == math.inf and best(table[("sp", 64)])[0] != 2.0**-8
    assert 2.0**-8 not in table[("mup", 512)] and len(table[("mup", 512)]) == len(GRID) - 1


def test_write_transfer_writes_the_page_json_and_figure(tmp_path):
    paths = write_transfer(write_runs(tmp_path / "runs.csv"), tmp_path)
    assert [p.name for p in paths] == ["transfer.json", "transfer.md", "transfer.png"]
    assert json.loads(paths[0].read_text())["parametrizations"]["sp"]["best_lr_drift_steps"] == -3
    assert "| sp | 512 | 0.000488281 | " in paths[1].read_text()
    assert "- mup: the best learning rate spans 0 grid step(s) across the widths" in paths[1].read_text()
    assert paths[2].stat().st_size > 10_000
