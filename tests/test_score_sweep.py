"""A whole sweep scored once in one call: `evaluate.py sweep_dir=<folder> split=test` scores every finished,
pre-registered job at its registered step through the ledger, refuses unfinished and unregistered jobs (listed,
untouched), skips jobs already scored, and writes the held-out table with its paired comparison."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml
from conftest import PYTHON, REPO

from tinygpt.common.run_folder import EVALUATIONS
from tinygpt.report.score_sweep import plan_sweep, score_planned
from tinygpt.train.run import train

TEST = "data.test_fraction=0.1"


@pytest.fixture(scope="module")
def trained(tmp_path_factory, small_corpus):
    """Two variants x seeds 0 and 1, pre-registered at step 8, trained once for the module."""
    from conftest import compose_train

    base = tmp_path_factory.mktemp("trained")
    for position in ("learned", "rope"):
        for seed in (0, 1):
            overrides = [f"model.position={position}", f"seed={seed}"]
            cfg = compose_train(
                ["experiment=smoke", "data=textfile", f"data.path={small_corpus}", TEST, "score_once.steps=[8]"]
                + overrides
            )
            folder = base / ",".join(overrides)
            train(cfg, folder)
            (folder / ".hydra").mkdir()
            (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    return base


@pytest.fixture
def sweep(trained, tmp_path):
    """The trained jobs, an unfinished one and one trained without a pre-registered step."""
    sweep = tmp_path / "sweep"
    shutil.copytree(trained, sweep)
    unfinished = sweep / "model.position=alibi,seed=0"
    shutil.copytree(sweep / "model.position=rope,seed=0", unfinished)
    record = json.loads((unfinished / "run.json").read_text())
    record["config"]["model"]["position"] = "alibi"
    (unfinished / "run.json").write_text(json.dumps(record | {"status": "running"}))
    (unfinished / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["model.position=alibi", "seed=0"]))
    unregistered = sweep / "model.position=none,seed=0"
    shutil.copytree(sweep / "model.position=rope,seed=1", unregistered)
    record = json.loads((unregistered / "run.json").read_text())
    record.pop("score_once")
    record["config"]["model"]["position"] = "none"
    (unregistered / "run.json").write_text(json.dumps(record))
    (unregistered / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["model.position=none", "seed=0"]))
    return sweep


def ledger_rows(folder) -> list[dict]:
    path = folder / EVALUATIONS
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_one_call_scores_every_finished_job_once_and_lists_the_rest(sweep):
    result = subprocess.run(
        [PYTHON, "scripts/evaluate.py", f"sweep_dir={sweep}", "split=test"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr[-2000:]  # a job was refused
    out = result.stdout
    assert "6 jobs; 4 to score, 0 already scored, 2 refused" in out
    assert "refused: model.position=alibi,seed=0: not finished (unfinished)" in out
    assert "refused: model.position=none,seed=0: no pre-registered scoring step" in out
    for position in ("learned", "rope"):
        for seed in (0, 1):
            rows = ledger_rows(sweep / f"model.position={position},seed={seed}")
            assert [(r["split"], r["step"], r["forced"]) for r in rows] == [("test", 8, False)]
            assert f"model.position={position},seed={seed}: step 8 held-out bits per byte" in out
    assert ledger_rows(sweep / "model.position=alibi,seed=0") == []
    assert ledger_rows(sweep / "model.position=none,seed=0") == []

    report = (sweep / "report.md").read_text()
    assert "## Held-out scores (evaluations.jsonl)" in report
    assert "## Held-out: each variant against the reference" in report
    learned = {s: ledger_rows(sweep / f"model.position=learned,seed={s}")[0]["bits_per_byte"] for s in (0, 1)}
    rope = {s: ledger_rows(sweep / f"model.position=rope,seed={s}")[0]["bits_per_byte"] for s in (0, 1)}
    first, other = ("learned", "rope") if "Reference: **model.position=learned**" in report else ("rope", "learned")
    values = {"learned": learned, "rope": rope}
    differences = " / ".join(f"{values[other][s] - values[first][s]:+.3f}" for s in (0, 1))
    assert f"| model.position={other} | held-out bits per byte | {differences} (0 / 1) |" in report

    # again: every registered job is skipped as already scored, nothing is added to any ledger
    before = {p: p.read_text() for p in sweep.glob("*/" + EVALUATIONS)}
    jobs, plan = plan_sweep(sweep)
    assert plan.to_score == [] and len(plan.already) == 4 and len(plan.refused) == 2
    assert all("step 8 on " in when for _, when in plan.already)
    assert score_planned(plan) == []
    assert {p: p.read_text() for p in sweep.glob("*/" + EVALUATIONS)} == before


def test_a_sweep_is_scored_on_the_held_out_split_only(sweep):
    from omegaconf import OmegaConf

    from tinygpt.cli.evaluate import evaluate_sweep

    settings = {"run_dir": None, "ckpt": None, "sweep_dir": str(sweep), "split": "dev", "device": "cpu"}
    with pytest.raises(SystemExit, match=r"refused: sweep_dir= with split=dev: a sweep is scored on the held-out"):
        evaluate_sweep(OmegaConf.create(settings | {"force": False, "reason": None}))
    with pytest.raises(SystemExit, match=r"refused: sweep_dir= scores each job once .* without run_dir="):
        evaluate_sweep(OmegaConf.create(settings | {"split": "test", "force": True, "reason": "again"}))
    assert not list(sweep.glob("*/" + EVALUATIONS)) and not (sweep / "report.md").exists()


def test_a_job_without_a_checkpoint_at_its_step_is_refused(sweep):
    for path in (sweep / "model.position=rope,seed=1" / "checkpoints").glob("*.ckpt"):
        path.unlink()
    _, plan = plan_sweep(sweep)
    refused = dict((job.name, why) for job, why in plan.refused)
    assert refused["model.position=rope,seed=1"].startswith("no checkpoint at the pre-registered step(s) [8]")


def test_report_puts_the_baselines_beside_the_tables_computed_once(sweep, capsys):
    from tinygpt.cli.report import main as report_main

    _, plan = plan_sweep(sweep)
    score_planned(plan)
    assert report_main([str(sweep), "--baselines", "--held-out"]) == 0
    dev = json.loads((sweep / "baselines" / "baselines_dev.json").read_text())
    test = json.loads((sweep / "baselines" / "baselines_test.json").read_text())
    record = json.loads((sweep / "model.position=rope,seed=0" / "run.json").read_text())
    assert dev["data"] == record["config"]["data"]  # the runs' own data: the same text
    report = (sweep / "report.md").read_text()
    dev_part = report.split("## Beside the baselines (dev)")[1].split("## ")[0]
    held_part = report.split("## Beside the baselines (held-out)")[1].split("## ")[0]
    for part, baselines in ((dev_part, dev), (held_part, test)):
        for name, label in (("bz2", "bz2 (given the training text)"), ("unigram", "unigram (add-one)")):
            assert f"| *{label}* | {baselines['baselines'][name]['bits_per_byte']:.3f} | baseline |" in part
    learned = [json.loads((sweep / f"model.position=learned,seed={s}" / "run.json").read_text()) for s in (0, 1)]
    mean = sum(r["best"]["dev_bits_per_byte"] for r in learned) / 2
    assert f"| model.position=learned | {mean:.3f} | best dev bits per byte, mean of 2 run(s) |" in dev_part
    # the held-out baselines were logged once; a second report reads them back without scoring again
    ledger = (sweep / "baselines" / EVALUATIONS).read_text()
    assert len(ledger.splitlines()) == len(test["baselines"])
    assert report_main([str(sweep), "--baselines", "--held-out"]) == 0
    assert (sweep / "baselines" / EVALUATIONS).read_text() == ledger


def test_baselines_are_refused_for_runs_on_other_data(sweep):
    from tinygpt.cli.report import main as report_main

    path = sweep / "model.position=rope,seed=1" / "run.json"
    record = json.loads(path.read_text())
    record["config"]["data"]["fraction"] = 0.5
    path.write_text(json.dumps(record))
    with pytest.raises(SystemExit, match=r"refused: --baselines: the runs differ in data.fraction \(1.0 in "):
        report_main([str(sweep), "--baselines"])
    assert not (sweep / "baselines").exists()
