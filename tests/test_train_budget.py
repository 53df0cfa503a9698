"""budget.flops (tinygpt/train/budget.py): a run trains the steps its compute budget buys and records N, D and C."""

from __future__ import annotations

import json
import math

import pytest

from tinygpt.common.errors import ConfigError
from tinygpt.train.budget import BudgetConfig
from tinygpt.train.run import train


def test_two_sizes_at_one_budget_train_steps_in_the_inverse_ratio_of_their_flops_per_token(tiny_cfg, tmp_path):
    budget = 2e9
    records = {}
    for width in (32, 64):
        cfg = tiny_cfg(f"budget.flops={budget}", f"model.d_model={width}", "trainer.max_steps=1000")
        records[width] = train(cfg, tmp_path / f"w{width}")
    spent = {w: r["budget"] for w, r in records.items()}
    for width, record in records.items():
        s = spent[width]
        tokens = 4 * 32  # experiment=smoke: 4 windows of 32 tokens a step
        assert s["tokens_per_step"] == tokens and record["step"] == s["steps"]  # trained exactly the steps bought
        assert s["steps"] == math.floor(budget / (s["flops_per_token"] * tokens))  # never over budget
        assert s["tokens"] == s["steps"] * tokens and s["flops_spent"] == s["flops_per_token"] * s["tokens"]
        assert budget - s["flops_per_token"] * tokens < s["flops_spent"] <= budget
        assert s["parameters"] == record["parameters"] and 0 < s["non_embedding_parameters"] < s["parameters"]
        assert json.loads((tmp_path / f"w{width}" / "run.json").read_text())["budget"] == s
    ratio = spent[64]["flops_per_token"] / spent[32]["flops_per_token"]
    assert abs(spent[32]["steps"] / ratio - spent[64]["steps"]) <= 1


def test_a_budget_smaller_than_one_step_is_refused_in_one_line(tiny_cfg, tmp_path):
    with pytest.raises(ConfigError, match=r"^budget\.flops=1000 buys less than one step: a step of this model costs"):
        train(tiny_cfg("budget.flops=1000"), tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.parametrize("flops", [0, -1.0, float("inf")])
def test_a_budget_that_is_not_a_positive_number_is_refused(flops):
    with pytest.raises(ValueError, match=r"^budget\.flops="):
        BudgetConfig(flops=flops)


LADDER = ("w64", "w96", "w128", "w192", "w256", "w384", "w512")


def test_the_size_ladder_spans_more_than_a_decade_and_a_half_of_non_embedding_parameters():
    """conf/size/: depth 4 and 4 heads at every size, widths 64-512; each count is tinygpt-params' and the table's
    in docs/scaling.md."""
    from conftest import REPO, compose_train

    from tinygpt.model import build_on_meta, parameter_breakdown
    from tinygpt.train.preflight import without_hydra
    from tinygpt.train.schema import parse_run_config

    assert sorted(p.stem for p in (REPO / "conf" / "size").glob("*.yaml")) == sorted(LADDER)
    page = (REPO / "docs" / "scaling.md").read_text()
    counts = []
    for size in LADDER:
        model = parse_run_config(without_hydra(compose_train([f"size={size}", "model.vocab_size=2048"]))).model
        assert (model.n_layers, model.n_heads, model.d_model) == (4, 4, int(size[1:]))
        parts = parameter_breakdown(build_on_meta(model))
        non_embedding = parts["total"] - parts["embedding"] - parts["position"] - parts["output head"]
        assert f"| `{size}` | {model.d_model} | {non_embedding:,} | {parts['total']:,} |" in page
        counts.append(non_embedding)
    assert counts == sorted(counts) and math.log10(counts[-1] / counts[0]) >= 1.5
