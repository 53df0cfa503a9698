"""003's collapse diagnostics: the functions on hand-built models, then the training callback end to end (the
gradients it reports are the ones before clipping, at the steps asked for), then the report's table."""

from __future__ import annotations

import json
import math

import pytest
import torch

from tinygpt.metrics import unigram_entropy_bits
from tinygpt.model import GPT, GPTConfig
from tinygpt.report.report import write_report
from tinygpt.train.callbacks.collapse import attention_grad_norms, prediction_tvd
from tinygpt.train.module import GPTModule
from tinygpt.train.run import train

BASE = dict(vocab_size=40, context_length=16, d_model=32, n_layers=3, n_heads=4, n_kv_heads=2, dropout=0.0)


def test_attention_grad_norms_are_the_query_key_value_gradients_of_each_layer():
    torch.manual_seed(0)
    model = GPT(GPTConfig(**BASE))
    with pytest.raises(RuntimeError, match="layer 1: .*no gradient"):
        attention_grad_norms(model)
    idx = torch.randint(0, 40, (2, 16))
    torch.nn.functional.cross_entropy(model(idx).logits.flatten(0, 1), idx.roll(-1, 1).flatten()).backward()
    norms = attention_grad_norms(model)
    assert len(norms) == 3
    for norm, block in zip(norms, model.blocks, strict=True):
        a = block.attention  # GQA: key and value weights are narrower than the query weight
        expected = torch.cat(
            [a.q_proj.weight.grad.flatten(), a.k_proj.weight.grad.flatten(), a.v_proj.weight.grad.flatten()]
        ).norm()
        assert norm == pytest.approx(float(expected), rel=1e-6) and norm > 0


def test_prediction_tvd_is_zero_for_a_model_that_ignores_its_input():
    torch.manual_seed(0)
    a, b = torch.randint(0, 40, (16,)), torch.randint(0, 40, (16,))
    model = GPT(GPTConfig(**BASE, residual=False, init_std=0.5)).train()  # far from uniform
    assert prediction_tvd(model, a, a) == 0.0
    assert 0.01 < prediction_tvd(model, a, b) <= 1.0
    assert model.training  # the mode is restored
    with torch.no_grad():  # without residuals each block's output replaces the stream: all zero, and so the logits
        for block in model.blocks:
            block.mlp.down.weight.zero_()
    assert prediction_tvd(model, a, b) == pytest.approx(0.0, abs=1e-6)


def test_callback_records_the_gradients_before_clipping_at_the_asked_steps(tiny_cfg, tmp_path, monkeypatch):
    seen = []  # attention gradient norms at every step, taken just before tinygpt's clipping
    real_clip = GPTModule.configure_gradient_clipping

    def recording_clip(self, *args, **kwargs):
        seen.append(attention_grad_norms(self.model))
        return real_clip(self, *args, **kwargs)

    monkeypatch.setattr(GPTModule, "configure_gradient_clipping", recording_clip)
    result = train(tiny_cfg("diagnostics.collapse_steps=[1,3]", "optim.grad_clip=1e-3"), tmp_path)
    diagnostics = json.loads((tmp_path / "run.json").read_text())["diagnostics"]
    assert diagnostics == result["diagnostics"]
    assert set(diagnostics["steps"]) == {"1", "3"} and len(seen) == 8
    assert diagnostics["steps"]["1"]["attention_grad_norms"] == pytest.approx(seen[0], rel=1e-6)
    assert diagnostics["steps"]["3"]["attention_grad_norms"] == pytest.approx(seen[2], rel=1e-6)
    assert all(n > 1e-3 for n in seen[0])  # so clipping at 1e-3 would have changed them
    assert 0 < diagnostics["steps"]["1"]["train_loss_bits"] < 2 * math.log2(result["data"]["vocab_size"])
    assert 0.0 <= diagnostics["prediction_tvd"] <= 1.0 and diagnostics["prediction_tvd_step"] == 8

    from tinygpt.data import TextDataModule

    datamodule = TextDataModule(
        result["config"]["data"], context_length=result["config"]["model"]["context_length"], seed=0
    )
    datamodule.setup("fit")
    assert diagnostics["unigram_entropy_bits"] == pytest.approx(unigram_entropy_bits(datamodule.train_split.ids))


def test_bad_collapse_steps_name_the_field(tiny_cfg, tmp_path):
    with pytest.raises(ValueError, match=r"diagnostics.collapse_steps=\[0\]"):
        train(tiny_cfg("diagnostics.collapse_steps=[0]"), tmp_path)


def test_report_tabulates_the_diagnostics(tiny_cfg, tmp_path):
    sweep = tmp_path / "sweep"
    for residual in ("true", "false"):
        cfg = tiny_cfg("diagnostics.collapse_steps=[1,8]", f"model.residual={residual}")
        run_dir = sweep / f"model.residual={residual}"
        (run_dir / ".hydra").mkdir(parents=True)
        (run_dir / ".hydra" / "overrides.yaml").write_text(f"- model.residual={residual}\n")
        train(cfg, run_dir)
    text = write_report(sweep).markdown.read_text()
    assert "## Collapse diagnostics (003)" in text
    section = text.split("## Collapse diagnostics (003)")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| model.residual=")]
    steps_rows = [r for r in rows if r.count("|") == 8]
    assert [r.split("|")[3].strip() for r in steps_rows] == ["1", "8", "1", "8"]
