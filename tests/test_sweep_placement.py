"""Automatic placement in a real multirun on the CPU, with 2 simulated devices and 2 joblib workers, then the
report of that sweep: 2 variants x 2 seeds that train, and a variant whose jobs crash (a context of 100,000 is
longer than the corpus, found when its data is set up)."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest
from conftest import PYTHON, REPO, TINY_RUN

SEEDS = (0, 1)
VARIANTS = ("model.context_length=32", "model.context_length=16")


@pytest.fixture(scope="module")
def sweep(small_corpus, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    root = tmp_path_factory.mktemp("placement")
    sweep_dir = root / "sweep"
    # the crashing variant first: the first two jobs the workers take both crash, so whichever device is
    # leased first is held by a crashed job, and every later job shows whether that device came back. It crashes
    # when its data is set up (a window longer than the corpus), past the sweep's check of every job's settings
    done = subprocess.run(
        [
            PYTHON,
            "scripts/train.py",
            "-m",
            "model.context_length=100000,32,16",
            "seed=0,1",
            *TINY_RUN,
            "data=textfile",
            f"data.path={small_corpus}",
            "sweep.simulate_devices=2",
            f"sweep.lease_dir={root / 'leases'}",
            f"hydra.sweep.dir={sweep_dir}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return sweep_dir, done


def placements(sweep_dir: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text()) for p in sweep_dir.glob("*/placement.json")}


def test_every_job_leases_one_device_and_the_good_ones_finish(sweep):
    sweep_dir, done = sweep
    assert done.returncode != 0, "the context_length=100000 jobs must fail the sweep"
    assert "Joblib.Parallel(n_jobs=2" in done.stdout + done.stderr  # one worker per (simulated) device
    leases = placements(sweep_dir)
    assert len(leases) == 6  # every job, the crashed ones too
    for name, lease in leases.items():
        assert lease["device"] in ("sim-0", "sim-1") and lease["kind"] == "simulated"
        assert lease["released_at"] is not None, f"{name} kept its device after it ended"
        record = sweep_dir / name / "run.json"
        if "context_length=100000" in name:
            assert not record.exists()
        else:
            assert json.loads(record.read_text())["status"] == "finished"


def test_no_two_jobs_ever_hold_one_device(sweep):
    sweep_dir, _ = sweep
    by_device: dict[str, list[tuple[float, float]]] = {}
    for lease in placements(sweep_dir).values():
        by_device.setdefault(lease["device"], []).append((lease["acquired_at"], lease["released_at"]))
    for device, spans in by_device.items():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert start >= end, f"two jobs held {device} at once"


def test_a_crashed_jobs_device_is_leased_again(sweep):
    sweep_dir, _ = sweep
    leases = placements(sweep_dir)
    crashed = [lease for name, lease in leases.items() if "context_length=100000" in name]
    reused = [
        (c, later)
        for c in crashed
        for later in leases.values()
        if later["device"] == c["device"] and later["acquired_at"] >= c["released_at"]
    ]
    assert reused, "no job got a device back from a crashed job"


def test_report_of_the_sweep_matches_its_run_records(sweep, tmp_path):
    sweep_dir, _ = sweep
    out = tmp_path / "report"
    done = subprocess.run(
        [PYTHON, "scripts/report.py", str(sweep_dir), "--style", "seeds", "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    table = (out / "report.md").read_text()
    main_table = table.split("\n## ")[0]  # the comparison and provenance sections have rows per variant too
    rows = {line.split(" | ")[0].strip("| "): line for line in main_table.splitlines() if line.startswith("| model.")}
    for variant in VARIANTS:
        records = [json.loads(next(sweep_dir.glob(f"*{variant},*seed={seed}/run.json")).read_text()) for seed in SEEDS]
        best = [r["best"]["dev_loss"] for r in records]
        cells = rows[variant].split(" | ")
        assert cells[1] == f"{records[0]['parameters']:,}"
        assert cells[2] == " / ".join(f"{v:.3f}" for v in best)
        assert cells[3] == f"{sum(best) / 2:.3f}"
        assert cells[4].strip(" |") == f"{max(best) - min(best):.3f}"
    assert "no record / no record" in rows["model.context_length=100000"]  # the crashed variant is marked, not dropped
    assert "seeds 0 / 1" in table

    with (out / "runs.csv").open() as handle:
        runs = list(csv.DictReader(handle))
    assert len({run["job"] for run in runs}) == 6  # one row per run and validation point
    for run in runs:
        if run["status"] == "finished":
            record = json.loads((Path(run["folder"]) / "run.json").read_text())
            assert float(run["best_dev_bpb"]) == record["best"]["dev_bits_per_byte"]
            assert float(run["final_dev_loss"]) == record["final"]["dev_loss"]
    png = (out / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
