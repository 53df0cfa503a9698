"""The LSTM family: its size at 003's setup, carried-state scoring equal to one full pass, training and
scoring through the same LightningModule, checkpoints and metric as the GPT, and its baselines line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import compose_train

from tinygpt.baselines.run import run_baselines
from tinygpt.baselines.texts import load_split_text
from tinygpt.data.encoded import encode_segments
from tinygpt.metrics.costs import carried_state_bits, window_bits
from tinygpt.model import CharLSTM, build_model, config_from
from tinygpt.model.lstm import LSTMConfig
from tinygpt.train.checkpoints import load_model
from tinygpt.train.module import model_config
from tinygpt.train.run import train
from tinygpt.train.schema import parse_run_config
from tinygpt.train.score_once import AlreadyScored


def test_blog_lstm_is_003s_setup_at_about_380k_parameters():
    cfg = compose_train(["experiment=blog_lstm"])
    config = model_config(parse_run_config(cfg).model, vocab_size=148)  # 003's character vocabulary
    assert isinstance(config, LSTMConfig)
    # embedding 148·64 + LSTM 4·256·(64 + 256) + 2·4·256 biases + output 256·148 + 148
    assert build_model(config).num_parameters() == 377_236
    assert (cfg.trainer.max_steps, cfg.data.batch_size, cfg.model.context_length) == (3000, 64, 128)


def test_lstm_config_errors_name_the_field():
    with pytest.raises(ValueError, match="LSTMConfig.d_model=0"):
        LSTMConfig(d_model=0)
    with pytest.raises(ValueError, match="model.family='rnn'"):
        config_from({"family": "rnn"})


def test_carried_state_scoring_equals_one_full_pass():
    torch.manual_seed(0)
    model = CharLSTM(LSTMConfig(vocab_size=11, d_embed=8, d_model=16, n_layers=2)).eval()
    ids = torch.randint(0, 11, (97,))
    with torch.no_grad():
        full = F.cross_entropy(model(ids[None, :-1]).logits[0], ids[1:], reduction="none") / np.log(2)
    for chunk in (1, 7, 128):
        bits = carried_state_bits(model, ids, chunk=chunk)
        assert bits[0] == 0
        np.testing.assert_allclose(bits[1:], full.double().numpy(), rtol=1e-5, atol=1e-6)
    # scoring in windows is a different context: each window starts from the zero state
    encoded = encode_segments(_Ids(), [("d", ids.tolist())])
    windowed = window_bits(model, encoded, 16)
    assert abs(windowed[1:].sum() - full.sum().item()) > 1e-3


class _Ids:
    """A stand-in tokenizer whose 'text' is already a list of ids (one byte each)."""

    def encode_many_with_offsets(self, texts):
        return [
            (torch.tensor(t), torch.ones(len(t), dtype=torch.long), torch.ones(len(t), dtype=torch.long)) for t in texts
        ]


@pytest.fixture(scope="module")
def lstm_run(tmp_path_factory, small_corpus):
    run_dir = tmp_path_factory.mktemp("lstm")
    cfg = compose_train(
        [
            "experiment=smoke",
            "model=lstm",
            "model.context_length=32",
            "model.d_model=32",
            "model.d_embed=16",
            "data=textfile",
            f"data.path={small_corpus}",
        ]
    )
    return run_dir, train(cfg, run_dir)


def test_model_lstm_trains_and_checkpoints_through_the_framework(lstm_run):
    run_dir, record = lstm_run
    assert record["status"] == "finished" and record["curve"][-1]["step"] == 8
    assert 0 < record["final"]["dev_bits_per_byte"] < 8
    model, tokenizer, _ = load_model(run_dir / "checkpoints" / "last.ckpt")  # weights_only=True
    assert isinstance(model, CharLSTM) and model.config.d_model == 32
    assert list((run_dir / "tb").rglob("events.out.tfevents.*"))
    assert record["sample"]  # the sampler generated with the LSTM's carried state


def test_lstm_baseline_is_carried_state_over_the_scored_split(lstm_run, small_corpus, tmp_path):
    run_dir, record = lstm_run
    data = record["config"]["data"]
    lines: list[str] = []
    result = run_baselines(data, "dev", kn_order=2, lstm_run=str(run_dir), out_dir=tmp_path, echo=lines.append)
    assert lines[5].startswith("lstm: ") and lines[5].endswith(" bits per byte")
    model, tokenizer, _ = load_model(run_dir / "checkpoints" / "last.ckpt")
    text = load_split_text(data, "dev")
    bits = carried_state_bits(model, torch.tensor(tokenizer.encode(text.text)))
    assert result["baselines"]["lstm"]["bits_per_byte"] == pytest.approx(bits.sum() / text.scored_bytes, rel=1e-9)
    assert "carried" in result["baselines"]["lstm"]["context"]
    run_baselines(data, "test", kn_order=2, lstm_run=str(run_dir), out_dir=tmp_path, echo=lines.append)
    logged = [json.loads(x) for x in (run_dir / "evaluations.jsonl").read_text().splitlines()]
    assert logged[-1]["split"] == "test" and "carried" in logged[-1]["context"]
    assert logged[-1]["weights_sha256"] and logged[-1]["forced"] is False
    # the LSTM line is a held-out scoring of that run: a second one is refused before anything is written
    before = (run_dir / "evaluations.jsonl").read_text(), (tmp_path / "baselines_test.json").read_text()
    with pytest.raises(AlreadyScored, match="already scored on the held-out split"):
        run_baselines(data, "test", kn_order=2, lstm_run=str(run_dir), out_dir=tmp_path, echo=lines.append)
    assert ((run_dir / "evaluations.jsonl").read_text(), (tmp_path / "baselines_test.json").read_text()) == before
    run_baselines(data, "test", 2, str(run_dir), tmp_path, force=True, reason="a second look", echo=lines.append)
    logged = [json.loads(x) for x in (run_dir / "evaluations.jsonl").read_text().splitlines()]
    assert [(r["forced"], r["reason"]) for r in logged if r.get("source") == "baselines"] == [
        (False, None),
        (True, "a second look"),
    ]
    gpt_data = dict(data, dev_fraction=0.2)
    with pytest.raises(Exception, match="other splits"):
        run_baselines(gpt_data, "dev", lstm_run=str(run_dir), out_dir=tmp_path, echo=lines.append)
