"""Every experiment of the spec composes alone and with its variants, with the spec's settings."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import compose_train
from omegaconf import OmegaConf

from tinygpt.model import build_on_meta
from tinygpt.train.schema import parse_run_config

SINCE_GPT2_COUNTS = {
    "gpt2": 28_923_904,
    "rmsnorm": 28_921_600,
    "rope": 28_891_136,
    "swiglu": 28_916_736,
    "gqa": 28_529_152,
    "modern": 28_484_352,
}


def test_since_gpt2_is_000s_setup():
    cfg = compose_train(["experiment=since_gpt2"])
    assert cfg.name == "since_gpt2" and cfg.data.name == "timemachine"
    assert (cfg.data.tokenizer.name, cfg.data.split_unit, cfg.data.test_fraction, cfg.data.dev_fraction) == (
        "gpt2",
        "tokens",
        0.0,
        0.1,
    )
    assert (cfg.trainer.max_steps, cfg.data.batch_size, cfg.model.context_length) == (600, 16, 128)
    assert (cfg.lr, cfg.optim.lr, cfg.model.dropout, cfg.trainer.val_check_interval) == (1e-3, 1e-3, 0.0, 50)
    assert (cfg.model.position, cfg.model.norm, cfg.model.mlp, cfg.model.bias) == ("learned", "layernorm", "gelu", True)


@pytest.mark.parametrize("variant, total", SINCE_GPT2_COUNTS.items())
def test_since_gpt2_ablations_have_000s_parameter_counts(variant, total):
    cfg = compose_train(["experiment=since_gpt2", f"ablation={variant}"])
    config = replace(parse_run_config(cfg).model, vocab_size=50257)
    assert sum(p.numel() for p in build_on_meta(config).parameters()) == total


def test_blog_is_003s_setup():
    cfg = compose_train(["experiment=blog"])
    assert (cfg.data.name, cfg.data.corpus, cfg.data.tokenizer.name, cfg.data.dev) == ("peps", "dir", "char", "tail")
    assert cfg.data.test_k == 2
    assert (cfg.trainer.max_steps, cfg.trainer.val_check_interval, cfg.data.batch_size) == (4000, 250, 32)
    assert (cfg.model.context_length, cfg.model.d_model, cfg.model.n_layers, cfg.model.dropout) == (256, 192, 4, 0.2)
    assert cfg.optim.schedule == "constant" and cfg.optim.warmup_steps == 200


@pytest.mark.parametrize(
    "variant, changed",
    [
        ("baseline", {}),
        ("cosine", {"optim.schedule": "cosine"}),
        ("no_position", {"model.position": "none"}),
        ("learned_position", {"model.position": "learned"}),
        ("post_norm", {"model.prenorm": False}),
        ("no_residual", {"model.residual": False}),
    ],
)
def test_blog_ablations_change_one_switch(variant, changed):
    base = compose_train(["experiment=blog"])
    cfg = compose_train(["experiment=blog", f"blog_ablation={variant}"])
    keys = ["optim.schedule", "model.position", "model.prenorm", "model.residual", "model.norm", "model.mlp"]
    for key in keys:
        expected = changed.get(key, OmegaConf.select(base, key))
        assert OmegaConf.select(cfg, key) == expected, (variant, key)


def test_blog_final_trains_on_everything_with_cosine_and_keeps_checkpoints():
    cfg = compose_train(["experiment=blog_final", "data/fraction=quarter"])
    assert (cfg.data.dev, cfg.optim.schedule, cfg.data.fraction) == ("none", "cosine", 0.25)
    assert cfg.checkpoint.keep_every_n_steps == 250 and cfg.name == "blog_final"


def test_blog_final_registers_003s_score_before_training():
    """003's score, once, at its full budget: registered in the experiment itself (docs/experiments/003_full_budget.md),
    fp32 so seeds from different machines pair, every registered step a kept checkpoint."""
    cfg = compose_train(["experiment=blog_final"])
    assert OmegaConf.to_container(cfg.score_once) == {
        "steps": [250, 1000, 2000, 3000, 4000],
        "seeds": [0, 1, 2],
        "recipe": "blog-4000-char-dropout0.2-cosine-fp32",
    }
    assert (cfg.trainer.precision, cfg.trainer.max_steps, cfg.model.dropout, cfg.data.tokenizer.name) == (
        "32-true",
        4000,
        0.2,
        "char",
    )
    assert all(s % cfg.checkpoint.keep_every_n_steps == 0 for s in cfg.score_once.steps)


def test_smoke_is_tiny():
    cfg = compose_train(["experiment=smoke"])
    assert cfg.trainer.max_steps == 8 and cfg.model.d_model == 32


def test_last_checkpoint_is_written_every_checkpoint_every_n_steps_not_every_validation():
    """last.ckpt, the state a crash resumes from, every checkpoint.every_n_steps (conf/callbacks/default.yaml):
    with validation every 8 steps and checkpoints every 3, a crash loses at most 2 steps, not 7."""
    from hydra.utils import instantiate

    cfg = compose_train(["checkpoint.every_n_steps=3", "trainer.val_check_interval=8"])
    assert instantiate(cfg.callbacks.last_checkpoint).every_n_steps == 3
