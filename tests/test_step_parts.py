"""scripts/step_parts.py times the training path itself: the module's loss with its speed switches, any config's
own tokenizer, and no clipping where the config asks for none."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from conftest import REPO, compose_train, requires_data

from tinygpt.train.module import GPTModule

# 000's setup (GPT-2 tokens, split by tokens, grad_clip 0) on a model small enough for a test
TINY_SINCE_GPT2 = ["experiment=since_gpt2", "model.d_model=32", "model.n_heads=2", "model.n_layers=1"]


def step_parts():
    spec = importlib.util.spec_from_file_location("step_parts", REPO / "scripts" / "step_parts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    cfg = compose_train([*TINY_SINCE_GPT2, "speed.loss=chunked"])
    row = step_parts().time_parts(cfg, steps=2, warmup=1, device="cpu")
    assert (row["tokenizer"], row["vocab"], row["precision"]) == ("gpt2", 50257, "32-true")
    assert row["tokens"] == 16 * 128
    assert loss_calls["loss"] == ["chunked"] * 3  # the training loss, through speed.loss, at every step
    assert loss_calls["clip"] == []  # since_gpt2's grad_clip is 0: no clipping, as the Trainer does it
    assert row["step_ms"] == pytest.approx(sum(row["parts_ms"].values()))


def test_a_clipping_config_is_clipped_at_its_norm(loss_calls):
    cfg = compose_train(["experiment=smoke", "optim.grad_clip=0.5"])
    step_parts().time_parts(cfg, steps=1, warmup=1, device="cpu")
    assert loss_calls["clip"] == [0.5, 0.5]
