"""tinygpt-step-parts times the training path itself: the module's loss with its speed switches, any config's
own tokenizer, and no clipping where the config asks for none; it and tinygpt-bench-train build the module,
the data and the speed switches through train/run.py's calls, so they time what training trains."""

from __future__ import annotations

import pytest
import torch
from conftest import compose_train, requires_data

from tinygpt.bench import step_parts
from tinygpt.bench import train as bench_train
from tinygpt.data import build_datamodule
from tinygpt.train import device_settings
from tinygpt.train.module import GPTModule, build_module
from tinygpt.train.schema import parse_run_config

# 000's setup (GPT-2 tokens, split by tokens, grad_clip 0) on a model small enough for a test
TINY_SINCE_GPT2 = ["experiment=since_gpt2", "model.d_model=32", "model.n_heads=2", "model.n_layers=1"]


@pytest.fixture
def loss_calls(monkeypatch):
    """Every GPTModule.compute_loss call's speed.loss; the clip calls' max_norm."""
    calls = {"loss": [], "clip": []}
    compute_loss, clip = GPTModule.compute_loss, torch.nn.utils.clip_grad_norm_

    def counted_loss(self, inputs, targets):
        calls["loss"].append(self.speed_config.loss)
        return compute_loss(self, inputs, targets)

    def counted_clip(parameters, max_norm, *args, **kwargs):
        calls["clip"].append(max_norm)
        return clip(parameters, max_norm, *args, **kwargs)

    monkeypatch.setattr(GPTModule, "compute_loss", counted_loss)
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", counted_clip)
    return calls


@requires_data
def test_since_gpt2_is_timed_with_its_own_tokenizer_the_switched_loss_and_no_clipping(loss_calls):
    row = step_parts.time_parts([*TINY_SINCE_GPT2, "speed.loss=chunked"], steps=2, warmup=1, device="cpu")
    assert (row["tokenizer"], row["vocab"], row["precision"]) == ("gpt2", 50257, "32-true")
    assert row["tokens"] == 16 * 128
    assert loss_calls["loss"] == ["chunked"] * 3  # the training loss, through speed.loss, at every step
    assert loss_calls["clip"] == []  # since_gpt2's grad_clip is 0: no clipping, as the Trainer does it
    assert row["step_ms"] == pytest.approx(sum(row["parts_ms"].values()))


def test_a_clipping_config_is_clipped_at_its_norm(loss_calls):
    step_parts.time_parts(["experiment=smoke", "optim.grad_clip=0.5"], steps=1, warmup=1, device="cpu")
    assert loss_calls["clip"] == [0.5, 0.5]


def test_the_bench_scripts_build_what_training_builds(small_corpus):
    overrides = ["experiment=smoke", "data=textfile", f"data.path={small_corpus}", "model.dropout=0.1"]
    cfg = compose_train([*overrides, "trainer.max_steps=3", "trainer.val_check_interval=3"])
    run = parse_run_config(cfg)
    _, speed = device_settings.prepare(run)  # trainer.accelerator=auto: the CPU here
    datamodule = build_datamodule(run.data, run.model.context_length, run.seed)
    trained = build_module(run, datamodule.tokenizer, speed.speed)  # what tinygpt-train builds for this config
    parts_run, parts_speed, parts_data, timed = step_parts.setup(overrides, 3, "cpu")
    bench_run, bench_speed = bench_train.setup(overrides, 3, "cpu")
    assert parts_run == bench_run == run and parts_speed == bench_speed
    assert (bench_speed.kind, bench_speed.speed) == (speed.kind, speed.speed)  # the switches the model is built with
    assert [type(m) for m in timed.modules()] == [type(m) for m in trained.modules()]
    assert timed.model.num_parameters() == trained.model.num_parameters()
    assert all(
        torch.equal(a, b) for a, b in zip(timed.state_dict().values(), trained.state_dict().values(), strict=True)
    )
    assert timed.speed_config == trained.speed_config and timed.speed_config.dropout == "int16"  # auto, resolved
    assert parts_data.vocab_size == datamodule.vocab_size
