"""scripts/analyze.py's report on a trained run: per-token costs that sum to the metric, the comparison table
with the baselines, repeats and memorization sections, and held-out analysis logged only when asked."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from conftest import PYTHON, REPO, compose_train

from tinygpt.analysis.run import analyze
from tinygpt.baselines.run import run_baselines
from tinygpt.common.run_folder import EVALUATIONS
from tinygpt.data import TextDataModule
from tinygpt.metrics.costs import window_bits
from tinygpt.train.checkpoints import load_model
from tinygpt.train.evaluate import evaluate
from tinygpt.train.run import train


@pytest.fixture(scope="module")
def gpt_run(tmp_path_factory, small_corpus):
    run_dir = tmp_path_factory.mktemp("gpt")
    cfg = compose_train(["experiment=smoke", "data=textfile", f"data.path={small_corpus}"])
    record = train(cfg, run_dir)
    base = tmp_path_factory.mktemp("baselines")
    run_baselines(record["config"]["data"], "dev", kn_order=3, out_dir=base, echo=lambda _: None)
    return run_dir, record, base


def test_per_token_costs_sum_to_the_metric(gpt_run):
    run_dir, record, _ = gpt_run
    model, tokenizer, _ = load_model(run_dir / "checkpoints" / "last.ckpt")
    dm = TextDataModule(
        record["config"]["data"], context_length=model.config.context_length, seed=0, tokenizer=tokenizer
    )
    bits = window_bits(model, dm.dev_split, model.config.context_length)
    row = evaluate(str(run_dir), ckpt=str(run_dir / "checkpoints" / "last.ckpt"))[0]
    assert bits[0] == 0 and bits[1:].sum() == pytest.approx(row["bits"], rel=1e-6)


def test_report_has_the_table_repeats_and_memorization(gpt_run):
    run_dir, record, base = gpt_run
    lines: list[str] = []
    report = analyze(run_dir, "dev", baselines=base, samples=2, sample_chars=16, spans=(8, 4), echo=lines.append)
    assert list(report["table"]) == ["GPT, 4 steps", "GPT, 8 steps", "kneser-ney-3", "bz2", "lzma", "zlib", "unigram"]
    by_step = {p["step"]: p["dev_bits_per_byte"] for p in record["curve"]}
    assert report["table"]["GPT, 8 steps"]["bits_per_byte"] == pytest.approx(by_step[8], rel=1e-5)
    assert "train_sample_bpb" in report["table"]["GPT, 8 steps"]
    rows = report["repeats"]["rows"]
    assert [r["span"] for r in rows] == [8, 4]
    for r in rows:
        assert r["copied"]["fraction"] + r["rest"]["fraction"] <= 1 + 1e-12
        assert r["copied"]["fraction"] > 0.5  # word salad from a fixed vocabulary: mostly copied
    mem = report["memorization"]
    assert len(mem["samples"]) == 2 and mem["greedy"]["length"] >= 1
    for m in mem["samples"] + mem["held_out"]:
        if m["length"]:
            assert m["stretch"] in m["text"]
    text = (run_dir / "analysis_dev.md").read_text()
    assert "## Comparison" in text and "## Repeats" in text and "## Memorization" in text
    assert "| GPT, 8 steps |" in text
    # word salad repeats itself beyond the window as well as the training text: the overlap is named, and the
    # classes less it are every scored character, at both spans
    assert rows[1]["both"]["chars"] > 0
    assert f"({rows[1]['both']['fraction']:.1%} both copied and repeated, so these sum past 100%)" in text
    covered = [sum(r[k]["chars"] for k in ("copied", "repeated", "rest", "mixed")) - r["both"]["chars"] for r in rows]
    assert covered[0] == covered[1] == report["scored_chars"]
    assert not (run_dir / EVALUATIONS).exists()  # dev analysis is not a held-out scoring


def test_a_bpe_runs_report_has_its_repeats_per_token(tmp_path, small_corpus):
    run_dir = tmp_path / "bpe"
    overrides = ["experiment=smoke", "data=textfile", f"data.path={small_corpus}", "data/tokenizer=bpe"]
    train(compose_train([*overrides, "data.tokenizer.vocab_size=300", "trainer.max_steps=4"]), run_dir)
    report = analyze(run_dir, "dev", baselines=tmp_path / "none", samples=1, sample_chars=8, spans=(8,), echo=print)
    (row,) = report["repeats"]["rows"]
    # word salad from a fixed vocabulary: mostly copied; the classes of whole tokens cover every scored character
    assert row["copied"]["fraction"] > 0.5 and row["copied"]["mean_bits"] > 0
    covered = sum(row[k]["chars"] for k in ("copied", "rest", "mixed")) + row["repeated"]["chars"]
    assert covered >= report["scored_chars"] - 8  # less at most the first token, and overlaps add
    assert "bpe tokens" in (run_dir / "analysis_dev.md").read_text()


def test_held_out_analysis_only_when_asked_and_logged(gpt_run, tmp_path):
    run_dir, _, _ = gpt_run
    done = subprocess.run(
        [
            PYTHON,
            "scripts/analyze.py",
            f"run_dir={run_dir}",
            "split=test",
            f"baselines={tmp_path}",
            "samples=1",
            "sample_chars=8",
            "spans=[8]",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    logged = [json.loads(x) for x in (run_dir / EVALUATIONS).read_text().splitlines()]
    assert [r["step"] for r in logged] == [4, 8] and all(r["split"] == "test" for r in logged)
    assert "No baselines record" in (run_dir / "analysis_test.md").read_text()
    assert np.isfinite(logged[-1]["bits_per_byte"])
    assert all(r["source"] == "analyze" and r["weights_sha256"] and r["forced"] is False for r in logged)
    # a second held-out analysis is a second scoring: refused in one line, nothing written
    before = (run_dir / EVALUATIONS).read_text(), (run_dir / "run.json").read_text()
    again = subprocess.run(done.args, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.returncode != 0
    assert again.stderr.strip().splitlines()[-1].startswith("[tinygpt] refused: run ")
    assert "already scored on the held-out split" in again.stderr
    assert ((run_dir / EVALUATIONS).read_text(), (run_dir / "run.json").read_text()) == before
