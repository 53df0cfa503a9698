"""What a newcomer types, run as they type it: the console programs, in fresh processes, from folders of their own
(issue 71). Two tiny runs are trained once for the module: one on a plain text, started with a relative
data.path, and one on a text holding U+FFFD, which no exported tokenizer can hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import word_salad

pytestmark = pytest.mark.slow  # about ten fresh processes

BIN = Path(sys.executable).parent


def console(program: str, *arguments: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / program), *arguments], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    """The user's environment with a prepared cache of the module's own (to count its folders)."""
    env = dict(os.environ)
    env.pop("HYDRA_FULL_ERROR", None)
    env["TINYGPT_PREPARED"] = str(tmp_path_factory.mktemp("prepared"))
    return env


@pytest.fixture(scope="module")
def runs(tmp_path_factory, env) -> dict:
    """The two finished runs and what their training printed. The plain run is started in ``start/`` with a
    relative data.path; its sample is nucleus-sampled at a nucleus so small that only the likeliest token is kept."""
    home = tmp_path_factory.mktemp("home")
    (home / "start" / "corp").mkdir(parents=True)
    (home / "start" / "corp" / "salad.txt").write_text(word_salad())
    (home / "start" / "odd.txt").write_text("a stray \ufffd replacement character, the time traveller. " * 200)
    common = ["experiment=smoke", "data=textfile", "trainer.max_steps=3"]
    plain = console(
        "tinygpt-train", *common, "data.path=corp/salad.txt", "sample.prompt=a", "sample.top_p=1e-9",
        f"hydra.run.dir={home / 'sweep' / 'seed=0'}", cwd=home / "start", env=env,
    )  # fmt: skip
    odd = console(
        "tinygpt-train", *common, "data.path=odd.txt", "seed=1", f"hydra.run.dir={home / 'sweep' / 'seed=1'}",
        cwd=home / "start", env=env,
    )  # fmt: skip
    assert plain.returncode == 0 and odd.returncode == 0, plain.stderr[-2000:] + odd.stderr[-2000:]
    return {"home": home, "plain": home / "sweep" / "seed=0", "odd": home / "sweep" / "seed=1",
            "plain_said": plain.stdout, "odd_said": odd.stdout}  # fmt: skip


def test_the_training_sample_takes_top_p_and_a_run_folder_stands_for_its_checkpoint(runs, env):
    """sample.top_p=1e-9 keeps only the likeliest token, so the sample is tinygpt-generate's greedy continuation;
    tinygpt-generate takes the run folder for the checkpoint it ended on."""
    sample = json.loads((runs["plain"] / "run.json").read_text())["sample"]
    greedy = console(
        "tinygpt-generate", str(runs["plain"]), "prompt=a", "greedy=true", f"max_new_tokens={len(sample) - 1}",
        cwd=runs["home"], env=env,
    )  # fmt: skip
    assert greedy.returncode == 0, greedy.stderr[-2000:]
    assert greedy.stdout.strip() == sample.strip()


def test_a_finished_run_names_the_export_command_only_when_it_would_work(runs):
    assert "  tinygpt-export " in runs["plain_said"]
    assert "tinygpt-export" not in runs["odd_said"] and "tinygpt-evaluate" in runs["odd_said"]
    assert "(no export to transformers: " in runs["odd_said"] and "its vocabulary holds '\ufffd'" in runs["odd_said"]


def test_scoring_a_run_from_elsewhere_maps_the_prepared_folder_it_trained_on(runs, env, tmp_path):
    """The plain run's data.path was relative to start/; scored from another folder, no second prepared folder."""
    before = sorted(p.name for p in Path(env["TINYGPT_PREPARED"]).iterdir() if p.name != "scans")
    scored = console("tinygpt-evaluate", str(runs["plain"]), cwd=tmp_path, env=env)
    assert scored.returncode == 0, scored.stderr[-2000:]
    assert sorted(p.name for p in Path(env["TINYGPT_PREPARED"]).iterdir() if p.name != "scans") == before
    assert len(before) == 2  # the two runs' texts


def test_a_report_refuses_runs_of_different_texts_and_reports_a_single_run(runs, env, tmp_path):
    refused = console("tinygpt-report", str(runs["home"] / "sweep"), cwd=tmp_path, env=env)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr[-2000:]
    assert "different texts" in refused.stderr
    assert not (runs["home"] / "sweep" / "report.md").exists()
    single = console("tinygpt-report", str(runs["odd"]), cwd=tmp_path, env=env)
    assert single.returncode == 0, single.stderr[-2000:]
    assert "1 run (1 finished)" in (runs["odd"] / "report.md").read_text()
