"""A parallel sweep killed with kill -9 (the launcher alone, as the OOM killer or a lost session would) takes
its workers with it, and rerunning the command finishes every job once: no job trained twice, no duplicate
checkpoints, no step logged twice."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import PYTHON, REPO, TINY_RUN

STEPS = 300


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead too (its parent, the killed launcher, can no longer reap it; init does)
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return True


@pytest.mark.slow
def test_killed_parallel_sweep_takes_its_workers_and_a_rerun_finishes_each_job_once(small_corpus, tmp_path):
    sweep = tmp_path / "sweep"
    command = [
        PYTHON,
        "scripts/train.py",
        "-m",
        "seed=1,2",
        *TINY_RUN,
        "data=textfile",
        f"data.path={small_corpus}",
        f"trainer.max_steps={STEPS}",
        "trainer.val_check_interval=100",
        "trainer.log_every_n_steps=1",
        "checkpoint.every_n_steps=10",
        "logger=csv",
        "sweep.cpu_jobs=2",
        f"sweep.lease_dir={tmp_path / 'leases'}",
        f"hydra.sweep.dir={sweep}",
    ]
    with open(tmp_path / "first.log", "w") as log:
        launcher = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        workers = []
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and launcher.poll() is None and len(workers) < 2:
                jobs = sorted(sweep.glob("*seed=*"))
                if len(jobs) == 2 and all((j / "checkpoints" / "last.ckpt").exists() for j in jobs):
                    workers = [json.loads((j / "placement.json").read_text())["pid"] for j in jobs]
                time.sleep(0.05)
            assert len(workers) == 2, (tmp_path / "first.log").read_text()[-3000:]
            os.kill(launcher.pid, signal.SIGKILL)  # the launcher only: its workers must notice by themselves
            launcher.wait(timeout=30)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and any(alive(pid) for pid in workers):
                time.sleep(0.1)
            survivors = [pid for pid in workers if alive(pid)]
        finally:
            for pid in workers:  # never leave a process behind, whatever the test found
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
    assert not survivors, f"workers {survivors} outlived their killed launcher"
    assert "launcher (pid" in (tmp_path / "first.log").read_text()
    killed_at = {}
    for job in sorted(sweep.glob("*seed=*")):
        record = json.loads((job / "run.json").read_text())
        assert record["status"] in ("interrupted", "running"), record["status"]  # stopped mid-training
        killed_at[job.name] = record.get("step")

    again = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    for job in sorted(sweep.glob("*seed=*")):
        record = json.loads((job / "run.json").read_text())
        assert record["status"] == "finished" and record["step"] == STEPS
        assert 0 < record["resumed_from_step"] < STEPS
        assert [p["step"] for p in record["curve"]] == [100, 200, 300]
        names = sorted(p.name for p in (job / "checkpoints").iterdir())
        assert names == ["last.ckpt", "step000100.ckpt", "step000200.ckpt", "step000300.ckpt"], names
        with open(job / "csv" / "metrics.csv", newline="") as file:
            train_steps = [int(row["step"]) for row in csv.DictReader(file) if row["train/loss"]]
        assert train_steps == list(range(1, STEPS + 1))  # every step once: none lost, none repeated
