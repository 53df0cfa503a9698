"""Score once: evaluate.py split=test refuses a second held-out scoring of a checkpoint (same step, same weights,
another file name), records a forced one with its reason beside the first, holds to pre-registered steps; a
resumed run cannot change, drop or add its pre-registration."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from conftest import PYTHON, REPO

from tinygpt.analysis.run import analyze
from tinygpt.common.run_folder import EVALUATIONS, read_record
from tinygpt.train.evaluate import evaluate
from tinygpt.train.run import train
from tinygpt.train.schema import ConfigError
from tinygpt.train.score_once import AlreadyScored, pre_registration

TEST = "data.test_fraction=0.1"


def logged(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / EVALUATIONS).read_text().splitlines()]


@pytest.fixture
def run(tiny_cfg, tmp_path_factory):
    """A finished smoke run (8 steps, kept checkpoints at 4 and 8, last.ckpt = step 8), copied per test."""
    base = tmp_path_factory.getbasetemp() / "score_once_run"
    if not base.exists():
        train(tiny_cfg(TEST), base)

    def copy(name: str):
        target = tmp_path_factory.mktemp(name)
        shutil.copytree(base, target, dirs_exist_ok=True)
        return target

    return copy


def test_a_second_scoring_is_refused_before_anything_is_written(run):
    run_dir = run("twice")
    ckpts = run_dir / "checkpoints"
    (first,) = evaluate(str(run_dir), ckpt=str(ckpts / "step000008.ckpt"), split="test")
    before = (run_dir / EVALUATIONS).read_text(), (run_dir / "run.json").read_text()
    when = logged(run_dir)[0]["time"]
    expected = (
        f"run {run_dir}: checkpoint {ckpts / 'step000008.ckpt'} (step 8) was already scored on the held-out "
        f"split at {when}"
    )
    with pytest.raises(AlreadyScored, match=re.escape(expected)) as refused:
        evaluate(str(run_dir), ckpt=str(ckpts / "step000008.ckpt"), split="test")
    assert "\n" not in str(refused.value)
    # last.ckpt holds the same weights; a renamed copy too; neither evades the ledger
    shutil.copy(ckpts / "step000008.ckpt", ckpts / "renamed.ckpt")
    for other in ("last.ckpt", "renamed.ckpt"):
        with pytest.raises(AlreadyScored, match="the same weights"):
            evaluate(str(run_dir), ckpt=str(ckpts / other), split="test")
    assert ((run_dir / EVALUATIONS).read_text(), (run_dir / "run.json").read_text()) == before
    assert first["step"] == 8 and logged(run_dir)[0]["forced"] is False


def test_a_forced_scoring_needs_a_reason_and_keeps_both_records(run):
    run_dir = run("forced")
    ckpt = str(run_dir / "checkpoints" / "step000004.ckpt")
    evaluate(str(run_dir), ckpt=ckpt, split="test")
    for reason in (None, "", "  "):
        with pytest.raises(ConfigError, match="force=true needs a non-empty reason"):
            evaluate(str(run_dir), ckpt=ckpt, split="test", force=True, reason=reason)
    with pytest.raises(ConfigError, match="without force=true"):
        evaluate(str(run_dir), ckpt=ckpt, split="test", reason="because")
    (again,) = evaluate(str(run_dir), ckpt=ckpt, split="test", force=True, reason="rescored after a metric fix")
    rows = logged(run_dir)
    assert [(r["step"], r["forced"], r["reason"]) for r in rows] == [
        (4, False, None),
        (4, True, "rescored after a metric fix"),
    ]
    assert rows[0]["bits_per_byte"] == pytest.approx(again["bits_per_byte"])  # deterministic: the same score
    scorings = read_record(run_dir)["held_out_scorings"]
    assert [(s["step"], s["forced"], s["reason"]) for s in scorings] == [
        (4, False, None),
        (4, True, "rescored after a metric fix"),
    ]
    assert all("bits_per_byte" not in s for s in scorings)  # run.json lists scorings, never their scores
    assert scorings[0]["weights_sha256"] == rows[0]["weights_sha256"] and len(rows[0]["weights_sha256"]) == 64


def test_a_whole_run_scores_each_checkpoint_once_and_the_dev_split_is_free(run):
    run_dir = run("whole")
    rows = evaluate(str(run_dir), split="test")
    assert [r["step"] for r in rows] == [4, 8]  # last.ckpt = step000008.ckpt's weights: scored once
    with pytest.raises(AlreadyScored):
        evaluate(str(run_dir), split="test")
    for _ in range(2):
        assert len(evaluate(str(run_dir), split="dev")) == 3
    with pytest.raises(ValueError, match="split=test only"):
        evaluate(str(run_dir), split="dev", force=True, reason="x")
    assert len(logged(run_dir)) == 2


def test_pre_registered_steps_are_recorded_before_training_and_enforced(tiny_cfg, tmp_path):
    record = train(tiny_cfg(TEST, "score_once.steps=[8]", "score_once.recipe=smoke-chars"), tmp_path)
    registration = record["score_once"]
    assert registration["steps"] == [8] and registration["recipe"] == "smoke-chars"
    assert registration["switches"]["optim.lr"] == 1e-3 and registration["switches"]["seed"] == 0
    assert not any(k.startswith(("progress", "sweep", "score_once")) for k in registration["switches"])
    ckpts = tmp_path / "checkpoints"
    with pytest.raises(AlreadyScored, match=r"step 4, not a pre-registered scoring step \[8\]"):
        evaluate(str(tmp_path), ckpt=str(ckpts / "step000004.ckpt"), split="test")
    with pytest.raises(AlreadyScored, match="step 4, not a pre-registered"):  # the whole run holds step 4 too
        evaluate(str(tmp_path), split="test")
    assert not (tmp_path / EVALUATIONS).exists()
    evaluate(str(tmp_path), ckpt=str(ckpts / "step000008.ckpt"), split="test")
    evaluate(str(tmp_path), ckpt=str(ckpts / "step000004.ckpt"), split="test", force=True, reason="the curve")
    assert [(r["step"], r["forced"]) for r in logged(tmp_path)] == [(8, False), (4, True)]


def test_held_out_analysis_scores_the_pre_registered_step_once(tiny_cfg, tmp_path):
    # analyze.py split=test is a held-out scoring like evaluate.py's: only the registered step, once
    train(tiny_cfg(TEST, "score_once.steps=[8]"), tmp_path)
    lines: list[str] = []
    report = analyze(tmp_path, split="test", baselines=tmp_path / "none", samples=1, sample_chars=8, echo=lines.append)
    assert list(report["table"]) == ["GPT, 8 steps"]
    assert "scoring the pre-registered step(s) [8] only; left out step 4" in lines[0]
    assert [(r["step"], r["source"]) for r in logged(tmp_path)] == [(8, "analyze")]
    with pytest.raises(AlreadyScored, match=r"\(step 8\) was already scored"):
        evaluate(str(tmp_path), split="test", ckpt=str(tmp_path / "checkpoints" / "step000008.ckpt"))
    with pytest.raises(AlreadyScored, match="already scored"):
        analyze(tmp_path, split="test", baselines=tmp_path / "none", samples=1, sample_chars=8, echo=lines.append)
    assert len(logged(tmp_path)) == 1


def test_a_resumed_run_cannot_change_drop_or_add_its_pre_registration(tiny_cfg, tmp_path):
    registered = tmp_path / "registered"
    train(tiny_cfg(TEST, "score_once.steps=[8]"), registered)
    before = (registered / "run.json").read_text()
    for overrides, field in (
        (["score_once.steps=[4,8]"], "score_once.steps="),
        (["score_once.steps=[8]", "score_once.recipe=other"], "score_once.recipe="),
        (["score_once.steps=[8]", "lr=3e-4"], "lr=0.0003 differs from the pre-registered"),
        ([], "score_once.steps: this run pre-registered steps [8]"),
    ):
        with pytest.raises(ConfigError, match=field.replace("[", r"\[").replace("]", r"\]")) as refused:
            train(tiny_cfg(TEST, *overrides), registered)
        assert "\n" not in str(refused.value)
    assert (registered / "run.json").read_text() == before
    # unchanged: accepted (the finished run is skipped as before)
    assert train(tiny_cfg(TEST, "score_once.steps=[8]"), registered)["score_once"]["steps"] == [8]
    plain = tmp_path / "plain"
    train(tiny_cfg(TEST), plain)
    with pytest.raises(ConfigError, match="trained without a pre-registered scoring step"):
        train(tiny_cfg(TEST, "score_once.steps=[8]", "trainer.max_steps=8"), plain)


def test_a_resumed_run_cannot_change_drop_or_add_its_registered_seeds(tiny_cfg, tmp_path):
    """The seeds to score are part of the registration: a resume that widens, narrows, drops or adds them is
    refused in one line naming score_once.seeds, and run.json is left as it was."""
    seed = tiny_cfg().seed
    registered = tmp_path / "registered"
    train(tiny_cfg(TEST, "score_once.steps=[8]", f"score_once.seeds=[{seed}]"), registered)
    before = (registered / "run.json").read_text()
    assert json.loads(before)["score_once"]["seeds"] == [seed]
    for seeds in (f"[{seed},{seed + 1}]", "[]"):
        with pytest.raises(ConfigError, match=re.escape("score_once.seeds=")) as refused:
            train(tiny_cfg(TEST, "score_once.steps=[8]", f"score_once.seeds={seeds}"), registered)
        assert "\n" not in str(refused.value) and "differs from the pre-registered" in str(refused.value)
    assert (registered / "run.json").read_text() == before
    assert train(tiny_cfg(TEST, "score_once.steps=[8]", f"score_once.seeds=[{seed}]"), registered)["score_once"][
        "seeds"
    ] == [seed]
    plain = tmp_path / "plain"
    train(tiny_cfg(TEST, "score_once.steps=[8]"), plain)
    with pytest.raises(ConfigError, match=re.escape("score_once.seeds=")):
        train(tiny_cfg(TEST, "score_once.steps=[8]", f"score_once.seeds=[{seed}]"), plain)


def test_a_bad_pre_registration_is_refused_before_the_folder_is_locked(tiny_cfg, tmp_path):
    """Steps or a seed that cannot be registered end train() before it makes or locks the run's folder."""
    for overrides in (["score_once.steps=[9]"], ["score_once.steps=[8]", "score_once.seeds=[1,2]"]):
        with pytest.raises(ConfigError, match=r"^(score_once\.steps=\[9\] is not allowed|seed=0 is not one of)"):
            train(tiny_cfg(TEST, *overrides), tmp_path / "run")
        assert not (tmp_path / "run").exists()


def test_pre_registered_steps_must_have_a_checkpoint_to_score(tiny_cfg):
    from omegaconf import OmegaConf

    def config(*overrides):
        return OmegaConf.to_container(tiny_cfg(*overrides), resolve=True)

    assert pre_registration(config()) is None
    for steps, message in (
        ("[5]", "step 5 will have no checkpoint"),
        ("[0]", "an integer in"),
        ("[9]", "trainer.max_steps=8"),
        ("[4,4]", "listed twice"),
    ):
        with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
            pre_registration(config(f"score_once.steps={steps}"))
    with pytest.raises(ConfigError, match="score_once.recipe='x' is given without score_once.steps"):
        pre_registration(config("score_once.recipe=x"))
    assert pre_registration(config("score_once.steps=[4,8]"))["steps"] == [4, 8]


def test_the_command_refuses_in_one_line(run):
    run_dir = run("cli")
    command = [
        PYTHON,
        "scripts/evaluate.py",
        f"run_dir={run_dir}",
        "ckpt=" + str(run_dir / "checkpoints" / "step000004.ckpt"),
        "split=test",
    ]
    assert subprocess.run(command, cwd=REPO, capture_output=True, text=True).returncode == 0
    again = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert again.returncode != 0
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("[tinygpt] refused: run ") and "already scored" in lines[0]
    forced = subprocess.run([*command, "force=true", "reason='second look'"], cwd=REPO, capture_output=True, text=True)
    assert forced.returncode == 0, forced.stderr
    assert [r["reason"] for r in logged(run_dir)] == [None, "second look"]


def test_the_ledger_knows_a_checkpoint_by_its_step_or_its_weights(tmp_path):
    from tinygpt.train.score_once import check_scoring

    earlier = {
        "time": "2026-01-01T00:00:00+0000",
        "checkpoint": "a/step000100.ckpt",
        "split": "test",
        "step": 100,
        "weights_sha256": "aaa",
        "bits_per_byte": 2.0,
    }
    baseline = {"time": "t", "baseline": "bz2", "split": "test", "bits_per_byte": 2.3}  # no step: not a checkpoint
    (tmp_path / EVALUATIONS).write_text(json.dumps(earlier) + "\n" + json.dumps(baseline) + "\n")
    with pytest.raises(AlreadyScored, match="the same step as a/step000100.ckpt"):  # re-trained: other weights
        check_scoring(tmp_path, [{"checkpoint": "b.ckpt", "step": 100, "weights_sha256": "bbb"}], None, False, None)
    with pytest.raises(AlreadyScored, match="the same weights as a/step000100.ckpt"):  # a copy saved at another step
        check_scoring(tmp_path, [{"checkpoint": "c.ckpt", "step": 7, "weights_sha256": "aaa"}], None, False, None)
    check_scoring(tmp_path, [{"checkpoint": "d.ckpt", "step": 200, "weights_sha256": "ddd"}], None, False, None)
    with pytest.raises(AlreadyScored, match=r"step 200, not a pre-registered scoring step \[300\]"):
        check_scoring(tmp_path, [{"checkpoint": "d.ckpt", "step": 200, "weights_sha256": "ddd"}], [300], False, None)
    check_scoring(tmp_path, [{"checkpoint": "b.ckpt", "step": 100, "weights_sha256": "bbb"}], [300], True, "why")


def test_every_scoring_tool_refuses_force_on_the_dev_split_and_an_unknown_split(run, tmp_path):
    run_dir = run("requests")
    for call in (
        lambda **kw: evaluate(str(run_dir), **kw),
        lambda **kw: analyze(run_dir, baselines=tmp_path, **kw),
    ):
        with pytest.raises(ValueError, match=r"force= and reason= apply to split=test only"):
            call(split="dev", force=True, reason="why")
        with pytest.raises(ValueError, match=r"split='train' is not allowed; choose dev or test"):
            call(split="train")
    assert not (run_dir / EVALUATIONS).exists()
