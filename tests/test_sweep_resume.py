"""Sweep resumption with automatic placement: a sweep killed mid-way (kill -9 of the whole process group, as a
crash or a lost machine would) and rerun with the same command skips its finished job (without leasing it a
device or rewriting its placement.json) and resumes the other from checkpoints/last.ckpt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from conftest import PYTHON, REPO, TINY_RUN

SHORT, LONG = 8, 400  # steps: the short job finishes while the long one is still training


def job_dir(sweep: Path, steps: int) -> Path | None:
    found = list(sweep.glob(f"*trainer.max_steps={steps}*"))
    return found[0] if found else None


def status(job: Path | None) -> str | None:
    try:
        return json.loads((job / "run.json").read_text())["status"]
    except (TypeError, FileNotFoundError, json.JSONDecodeError):
        return None


@pytest.mark.slow
def test_rerunning_an_interrupted_sweep_skips_finished_jobs_and_resumes_the_others(small_corpus, tmp_path):
    sweep = tmp_path / "sweep"
    command = [
        PYTHON,
        "scripts/train.py",
        "-m",
        f"trainer.max_steps={SHORT},{LONG}",
        *TINY_RUN,
        "data=textfile",
        f"data.path={small_corpus}",
        "trainer.val_check_interval=100",
        "sweep.cpu_jobs=2",
        f"sweep.lease_dir={tmp_path / 'leases'}",
        f"hydra.sweep.dir={sweep}",
    ]
    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and first.poll() is None:
                short, long = job_dir(sweep, SHORT), job_dir(sweep, LONG)
                if status(short) == "finished" and long and (long / "checkpoints" / "last.ckpt").exists():
                    break
                time.sleep(0.05)
        finally:
            os.killpg(first.pid, signal.SIGKILL)  # the launcher and both of its workers, mid-sweep
            first.wait(timeout=30)
    short, long = job_dir(sweep, SHORT), job_dir(sweep, LONG)
    assert status(short) == "finished", (tmp_path / "first.log").read_text()[-3000:]
    assert status(long) == "running", "the long job must have been killed while training"
    killed_at = torch.load(long / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    assert 0 < killed_at < LONG
    short_checkpoint = (short / "checkpoints" / "last.ckpt").stat().st_mtime_ns
    short_placement = (short / "placement.json").read_text()
    long_placement = json.loads((long / "placement.json").read_text())

    again = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("already finished") == 1
    assert (short / "checkpoints" / "last.ckpt").stat().st_mtime_ns == short_checkpoint  # not retrained
    record = json.loads((long / "run.json").read_text())
    assert record["status"] == "finished" and record["step"] == LONG
    assert record["resumed_from_step"] == killed_at
    assert [p["step"] for p in record["curve"]] == list(range(100, LONG + 1, 100))
    # the rerun placed the resumed job again (parallel, one CPU slot each) and released it; the skipped one
    # leased nothing, and its placement.json still says where it trained
    lease = json.loads((long / "placement.json").read_text())
    assert lease["kind"] == "cpu" and lease["parallel_jobs"] == 2 and lease["released_at"] is not None
    assert lease["acquired_at"] > long_placement["acquired_at"]
    assert (short / "placement.json").read_text() == short_placement


def test_sigterm_stops_the_whole_sweep_after_saving_the_running_job(small_corpus, tmp_path):
    """A SIGTERM to a sweep (a scheduler's preemption, `kill`, the end of a session) saves the running job's
    last.ckpt and ends the command with 143 (128 + 15): the next job never starts, and rerunning the same
    command resumes the stopped job. Hydra's launchers catch a job's exceptions and go on, which used to turn
    a SIGTERM into "skip to the next job"."""
    sweep = tmp_path / "sweep"
    command = [
        PYTHON,
        "scripts/train.py",
        "-m",
        "seed=0,1",
        *TINY_RUN,
        "data=textfile",
        f"data.path={small_corpus}",
        f"trainer.max_steps={LONG}",
        "trainer.val_check_interval=100",
        f"sweep.lease_dir={tmp_path / 'leases'}",
        f"hydra.sweep.dir={sweep}",
    ]

    def jobs() -> list[Path]:  # the job folders started so far (their names may be shortened with a hash)
        return [d for d in sweep.glob("*") if d.is_dir()] if sweep.exists() else []

    with open(tmp_path / "sweep.log", "w") as log:
        run = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and run.poll() is None:
                if jobs() and (jobs()[0] / "checkpoints" / "last.ckpt").exists():
                    break
                time.sleep(0.05)
            os.kill(run.pid, signal.SIGTERM)  # the launcher's process, which runs the one-at-a-time jobs
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and run.poll() is None and len(jobs()) < 2:
                time.sleep(0.05)
            started_next = len(jobs()) > 1
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
            run.wait(timeout=30)
    output = (tmp_path / "sweep.log").read_text()
    assert not started_next, "the sweep went on to its next job after SIGTERM:\n" + output[-3000:]
    assert run.returncode == 128 + signal.SIGTERM, output[-3000:]
    (first_job,) = jobs()
    assert "seed=0" in (first_job / ".hydra" / "overrides.yaml").read_text()
    assert status(first_job) == "interrupted"
    assert "SIGTERM: stopped after step" in output and "Traceback" not in output
    step = torch.load(first_job / "checkpoints" / "last.ckpt", weights_only=True)["global_step"]
    assert 0 < step < LONG
