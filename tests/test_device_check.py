"""scripts/device_check.py --smoke: every step of the GPU check runs on the CPU at tiny sizes and leaves its
outputs, so the script that a short GPU loan depends on works before the loan; and its refusals."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "device_check.py"


def load_script():
    spec = importlib.util.spec_from_file_location("device_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_smoke_check_runs_every_step_and_writes_its_outputs(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--out", str(out), "--work", str(work), "--budget-s", "900"],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    summary = (out / "summary.md").read_text()
    for step in (
        "environment",
        "device tests",
        "bench (bench_precisions.md)",
        "design card, jobs_per_device=1",
        "design card, jobs_per_device=2",
        "table blog_ablation_4000",
    ):
        assert f"| {step} | " in summary
    assert "failed" not in summary and "stopped or skipped" not in summary
    assert json.loads((out / "env.json").read_text())["device"] == "cpu"
    # the device tests ran (on the CPU) and passed
    suite = ET.parse(out / "device_tests.xml").getroot().find("testsuite")
    assert int(suite.get("tests")) >= 20 and suite.get("failures") == "0" and suite.get("errors") == "0"
    assert "| smoke | 32-true | defaults | lightning |" in (out / "bench_precisions.md").read_text()
    # the card (two of its jobs in --smoke): one at a time, then two workers sharing one (simulated) device's two
    # slots (which slot each job got depends on whether they overlapped: timing, not asserted here)
    for k in (1, 2):
        placements = [json.loads(p.read_text()) for p in (out / f"card_k{k}").glob("*/placement.json")]
        assert len(placements) == 2 and {p["jobs_per_device"] for p in placements} == {k}
        assert {p["parallel_jobs"] for p in placements} == {k} and {p["device"] for p in placements} == {"sim-0"}
    assert "design card: jobs_per_device=2 vs 1 | measured" in summary
    table = out / "since_gpt2_600"
    assert (table / "report.md").is_file() and (table / "runs.csv").is_file()
    assert not list(out.rglob("*.ckpt"))  # checkpoints stay in --work


def test_it_refuses_without_a_device_or_a_data_root(tmp_path, monkeypatch, capsys):
    script = load_script()
    if not (torch.cuda.is_available() or torch.backends.mps.is_available()):
        with pytest.raises(SystemExit):
            script.main(["--out", str(tmp_path)])
        assert "no CUDA or MPS device here" in capsys.readouterr().err
    monkeypatch.delenv("TINYGPT_DATA", raising=False)
    with pytest.raises(SystemExit):
        script.main(["--smoke", "--out", str(tmp_path)])
    assert "TINYGPT_DATA is not set" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written
    assert os.environ.get("TINYGPT_DEVICE_TESTS_ON") is None
