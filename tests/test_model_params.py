"""Every parameter count of the spec, from the Hydra presets under conf/model, and scripts/params.py."""

import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from tinygpt.common.typed import typed
from tinygpt.model import GPTConfig, build_on_meta, parameter_breakdown

ROOT = Path(__file__).resolve().parents[1]
VARIANT_BASE = ["model=since_gpt2"]


def compose_model(overrides: list[str]) -> GPTConfig:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base=None):
        cfg = compose(config_name="params", overrides=overrides)
    return typed(GPTConfig, cfg.model, "model")


def count(overrides: list[str]) -> dict[str, int]:
    return parameter_breakdown(build_on_meta(compose_model(overrides)))


@pytest.mark.parametrize(
    "overrides, total",
    [
        ([], 28_923_904),  # GPT-2 style (chapter 4)
        (["model/norm=rmsnorm"], 28_921_600),
        (["model/position=rope"], 28_891_136),
        (["model.mlp=swiglu"], 28_916_736),
        (["model.n_kv_heads=2"], 28_529_152),
        (
            ["model/position=rope", "model/norm=rmsnorm", "model.mlp=swiglu", "model.n_kv_heads=2", "model.bias=false"],
            28_484_352,
        ),  # all four, no biases (the head stays untied)
    ],
    ids=["gpt2", "rmsnorm", "rope", "swiglu", "gqa", "all_four"],
)
def test_000_six_variants(overrides, total):
    assert count(VARIANT_BASE + overrides)["total"] == total


def test_003_model_with_148_characters():
    counts = count(["model.vocab_size=148"])  # the default preset, `blog`
    assert counts == {
        "embedding": 28_416,
        "position": 0,
        "attention": 589_824,
        "mlp": 1_179_648,
        "norms": 1_728,
        "output head": 0,
        "total": 1_799_616,
    }


@pytest.mark.parametrize(
    "preset, total",
    [
        ("gpt2_124m", 124_439_808),
        ("qwen3_0_6b", 596_049_920),
        ("llama3_8b", 8_030_261_248),
    ],
)
def test_published_models(preset, total):
    counts = count([f"model={preset}"])
    assert counts["total"] == total
    assert sum(v for k, v in counts.items() if k != "total") == total


def test_breakdown_agrees_with_num_parameters_and_counts_a_tied_table_once():
    tied = build_on_meta(compose_model(["model=tiny", "model.vocab_size=50"]))
    untied = build_on_meta(compose_model(["model=tiny", "model.vocab_size=50", "model.tie_embeddings=false"]))
    assert parameter_breakdown(tied)["total"] == tied.num_parameters()
    assert parameter_breakdown(tied)["output head"] == 0
    assert parameter_breakdown(untied)["output head"] == 50 * 32
    assert untied.num_parameters() - tied.num_parameters() == 50 * 32


def test_blog_preset_is_003s_model_and_the_default():
    config = compose_model([])
    assert (config.context_length, config.d_model, config.n_layers, config.n_heads) == (256, 192, 4, 4)
    assert (config.position, config.norm, config.mlp, config.bias, config.tie_embeddings, config.dropout) == (
        "rope",
        "rmsnorm",
        "swiglu",
        False,
        True,
        0.2,
    )
    assert config.vocab_size == 0  # filled from the tokenizer


@pytest.mark.parametrize("override", ["model/position=learned", "model.position=learned"])
def test_position_can_be_chosen_by_group_or_by_key(override):
    assert compose_model(["model=blog", override]).position == "learned"


def test_norm_can_be_chosen_by_group_or_by_key():
    assert compose_model(["model/norm=layernorm"]).norm == "layernorm"
    assert compose_model(["model.norm=layernorm"]).norm == "layernorm"


def test_unknown_preset_key_is_rejected():
    with pytest.raises(Exception, match="nonexistent"):
        compose_model(["+model.nonexistent=1"])


def run_params_script(*overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "params.py"), *overrides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def test_params_script_prints_breakdown_formula_and_total():
    result = run_params_script("model.vocab_size=148")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == "total parameters: 1,799,616"
    assert "12·L·D² + V·D = 1,797,888" in result.stdout
    expected = (("embedding", "28,416"), ("attention", "589,824"), ("mlp", "1,179,648"), ("norms", "1,728"))
    for group, n in expected:
        assert any(line.startswith(group) and n in line for line in lines), group


def test_params_script_asks_for_the_vocabulary_size():
    result = run_params_script()
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "[tinygpt] error: model.vocab_size is 0 (normally filled from the tokenizer); pass it, e.g. tinygpt-params "
        "model.vocab_size=148"
    ]  # the console command, which a wheel install has (it has no scripts/params.py)
