"""scripts/evaluate.py and scripts/generate.py on a trained checkpoint; precision and MoE switches."""

from __future__ import annotations

import json
import subprocess

import pytest
import torch
from conftest import PYTHON, REPO
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tinygpt.common.run_folder import EVALUATIONS
from tinygpt.model import generate
from tinygpt.train.checkpoints import load_model
from tinygpt.train.evaluate import evaluate
from tinygpt.train.run import train


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, small_corpus):
    from conftest import compose_train

    run_dir = tmp_path_factory.mktemp("run")
    cfg = compose_train(["experiment=smoke", "data=textfile", f"data.path={small_corpus}", "data.test_fraction=0.1"])
    record = train(cfg, run_dir)
    return run_dir, record


def test_evaluate_dev_matches_the_runs_own_validation(trained_run):
    run_dir, record = trained_run
    rows = evaluate(str(run_dir), split="dev")
    assert [row["step"] for row in rows] == [4, 8, 8]  # step000004, step000008, last
    by_step = {p["step"]: p["dev_bits_per_byte"] for p in record["curve"]}
    for row in rows:
        assert row["bits_per_byte"] == pytest.approx(by_step[row["step"]], rel=1e-5)
    assert not (run_dir / EVALUATIONS).exists()  # dev scoring is not a test scoring


def test_test_scoring_only_when_asked_and_recorded_with_its_time(trained_run):
    run_dir, _ = trained_run
    rows = evaluate(str(run_dir), ckpt=str(run_dir / "checkpoints" / "last.ckpt"), split="test")
    logged = [json.loads(line) for line in (run_dir / EVALUATIONS).read_text().splitlines()]
    assert logged[-1]["split"] == "test" and logged[-1]["time"]
    assert logged[-1]["bits_per_byte"] == pytest.approx(rows[0]["bits_per_byte"])
    assert 0 < rows[0]["bits_per_byte"] < 10
    with pytest.raises(ValueError, match="split='train'"):
        evaluate(str(run_dir), split="train")


def test_test_scoring_scores_the_test_split_not_the_dev_split(trained_run):
    from omegaconf import OmegaConf

    from tinygpt.data import TextDataModule
    from tinygpt.metrics import score

    run_dir, record = trained_run
    ckpt = run_dir / "checkpoints" / "step000004.ckpt"  # step 8 was scored above (last.ckpt): score once
    (row,) = evaluate(str(run_dir), ckpt=str(ckpt), split="test")
    model, tokenizer, _ = load_model(ckpt)
    datamodule = TextDataModule(
        OmegaConf.create(record["config"]).data,
        context_length=model.config.context_length,
        seed=record["config"]["seed"],
        tokenizer=tokenizer,
    )
    datamodule.setup("validate")
    expected = score(model, datamodule.test_dataloader())
    assert row["tokens"] == expected["tokens"] and row["bits_per_byte"] == pytest.approx(expected["bits_per_byte"])
    dev = next(p for p in record["curve"] if p["step"] == 4)
    assert row["bytes"] == 2973 - 1 and dev["dev_bytes"] != row["bytes"]  # the test bytes, less the first
    assert row["bits_per_byte"] != dev["dev_bits_per_byte"]


def test_generate_script_samples_from_a_checkpoint(trained_run):
    run_dir, _ = trained_run
    ckpt = run_dir / "checkpoints" / "last.ckpt"
    done = subprocess.run(
        [PYTHON, "scripts/generate.py", f"ckpt='{ckpt}'", "prompt=time machine", "max_new_tokens=12", "greedy=true"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    model, tokenizer, _ = load_model(ckpt)
    prompt = torch.tensor([tokenizer.encode("time machine")])
    expected = tokenizer.decode(generate(model, prompt, 12, greedy=True)[0].tolist())
    assert done.stdout.rstrip("\n") == expected


def test_bf16_mixed_precision_trains(tiny_cfg, tmp_path):
    record = train(tiny_cfg("trainer.precision=bf16-mixed", "trainer.max_steps=4"), tmp_path)
    assert record["status"] == "finished" and record["config"]["trainer"]["precision"] == "bf16-mixed"
    assert all(0 < p["dev_bits_per_byte"] < 20 for p in record["curve"])


def test_moe_auxiliary_loss_is_logged(tiny_cfg, tmp_path):
    train(tiny_cfg("model.mlp=moe", "model.n_experts=4", "model.top_k=2"), tmp_path)
    events = EventAccumulator(str(tmp_path / "tb")).Reload()
    aux = [e.value for e in events.Scalars("train/moe_aux_loss")]
    # Switch-Transformer form times the 0.01 weight: 0.01 * n_experts * sum f_i P_i >= 0.01 per layer
    assert len(aux) == 8 and all(a >= 0.01 * 2 * 0.99 for a in aux)


def test_csv_logger_writes_metrics_beside_tensorboard(tiny_cfg, tmp_path):
    record = train(tiny_cfg("logger=csv"), tmp_path)
    assert record["status"] == "finished"
    rows = (tmp_path / "csv" / "metrics.csv").read_text().splitlines()
    header = rows[0].split(",")
    assert {"train/loss", "dev/bpb"} <= set(header)
    assert list((tmp_path / "tb").glob("events.out.tfevents.*"))


def test_evaluate_and_analyze_find_a_corpus_where_the_run_found_it(small_corpus, tmp_path, monkeypatch):
    """data.path=salad.txt from the corpus's folder reads ./salad.txt; evaluate, run from elsewhere, reads the
    place the run recorded (run.json's data.corpus.location), not ./salad.txt there."""
    from conftest import TINY_RUN, compose_train

    from tinygpt.analysis.run import analyze
    from tinygpt.train.evaluate import evaluate
    from tinygpt.train.run import train

    monkeypatch.chdir(small_corpus.parent)
    record = train(compose_train([*TINY_RUN, "data=textfile", f"data.path={small_corpus.name}"]), tmp_path / "run")
    assert record["data"]["corpus"]["location"] == str(small_corpus.resolve())
    assert record["data"]["corpus"]["found_in"] == "the current folder"
    monkeypatch.chdir(tmp_path)
    [row] = [r for r in evaluate(str(tmp_path / "run")) if r["checkpoint"].endswith("last.ckpt")]
    assert row["bits_per_byte"] == pytest.approx(record["final"]["dev_bits_per_byte"], rel=1e-6)
    # analyze reads the same place (tinygpt/data/corpus.py's recorded_data)
    report = analyze(
        tmp_path / "run", "dev", baselines=tmp_path / "none", samples=1, sample_chars=8, spans=(8,), echo=str
    )
    assert report["table"][f"GPT, {record['step']} steps"]["bits_per_byte"] == pytest.approx(
        record["final"]["dev_bits_per_byte"], rel=1e-5
    )
