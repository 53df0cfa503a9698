"""The design card's command, run as a user types it (a subprocess), with tiny overrides."""

from __future__ import annotations

import json
import subprocess

import torch
from conftest import PYTHON, REPO, TINY_RUN, requires_data


def run_train(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "scripts/train.py", *args], cwd=REPO, capture_output=True, text=True, timeout=600)


@requires_data
def test_design_card_command_makes_four_jobs_and_rerun_skips_them(tmp_path):
    sweep = tmp_path / "sweep"
    args = ["-m", "model.position=rope,learned", "seed=0,1", *TINY_RUN, f"hydra.sweep.dir={sweep}"]
    done = run_train(*args)
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = sorted(p for p in sweep.iterdir() if p.is_dir() and (p / "run.json").exists())
    assert [p.name for p in jobs] == [
        f"experiment=smoke,model.position={position},seed={seed}" for position in ("learned", "rope") for seed in (0, 1)
    ]
    for job in jobs:
        record = json.loads((job / "run.json").read_text())
        assert record["status"] == "finished"
        assert list((job / "tb").glob("events.out.tfevents.*"))
        checkpoint = torch.load(job / "checkpoints" / "last.ckpt", weights_only=True)
        # the switch reaches the model: only learned positions have a position table
        has_table = any("position" in key for key in checkpoint["state_dict"])
        assert record["config"]["model"]["position"] in job.name
        assert has_table == (record["config"]["model"]["position"] == "learned")

    stamps = {job: (job / "checkpoints" / "last.ckpt").stat().st_mtime_ns for job in jobs}
    again = run_train(*args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stdout.count("already finished") == 4
    assert stamps == {job: (job / "checkpoints" / "last.ckpt").stat().st_mtime_ns for job in jobs}


def test_group_override_form_matches_plain_key_form(small_corpus, tmp_path):
    from conftest import compose_train

    base = TINY_RUN + ["data=textfile", f"data.path={small_corpus}"]
    for group, key, value in (
        ("model/position", "model.position", "learned"),
        ("model/norm", "model.norm", "layernorm"),
        ("optim/schedule", "optim.schedule", "cosine"),
        ("data/fraction", "data.fraction", "half"),
    ):
        via_group = compose_train(base + [f"{group}={value}"])
        via_key = compose_train(base + [f"{key}={value}"])
        section, field = key.split(".")
        assert via_group[section][field] == via_key[section][field] or (
            field == "fraction" and via_group[section][field] == 0.5 and via_key[section][field] == "half"
        )


def test_a_failing_job_does_not_stop_the_others(small_corpus, tmp_path):
    sweep = tmp_path / "sweep"
    # the failing job fails when its data is set up (a window longer than the corpus): a bad setting would have
    # refused the whole sweep before launch (tinygpt/train/preflight.py)
    done = run_train(
        "-m",
        "model.context_length=32,100000",
        *TINY_RUN,
        "data=textfile",
        f"data.path={small_corpus}",
        f"hydra.sweep.dir={sweep}",
    )
    assert done.returncode != 0
    assert "fewer than one window" in done.stderr
    (good,) = sweep.glob("*model.context_length=32")
    (bad,) = sweep.glob("*model.context_length=100000*")
    assert json.loads((good / "run.json").read_text())["status"] == "finished"
    assert not (bad / "checkpoints").exists()
