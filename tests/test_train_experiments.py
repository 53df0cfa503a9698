"""Issue 15's experiment files: 000's own optimizer settings (since_gpt2), 003's first round as one multirun
(blog_round1), the Shakespeare moonshot's data setup (moonshot); each composed, and what it sets checked."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import REPO, compose_train, real_data_root, requires_data
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tinygpt.model import GPTConfig, build_model
from tinygpt.train.checkpoints import check_resumable
from tinygpt.train.optim import OptimConfig
from tinygpt.train.schema import ConfigError, parse_run_config


def test_since_gpt2_uses_000s_adamw_not_003s():
    cfg = compose_train(["experiment=since_gpt2"])
    optim = parse_run_config(cfg).optim
    # 000: "AdamW at a learning rate of 0.001", nothing more: torch's AdamW defaults, every parameter decayed
    assert (optim.lr, optim.betas, optim.weight_decay, optim.decay_on) == (1e-3, [0.9, 0.999], 0.01, "all")
    assert (optim.warmup_steps, optim.schedule, optim.grad_clip) == (0, "constant", 0.0)
    assert cfg.trainer.precision == "32-true" and cfg.model.dropout == 0.0
    assert (cfg.data.batch_size, cfg.model.context_length, cfg.trainer.max_steps, cfg.trainer.val_check_interval) == (
        16,
        128,
        600,
        50,
    )
    # 003's experiments keep 003's optimizer
    blog = parse_run_config(compose_train(["experiment=blog"])).optim
    assert (blog.betas, blog.weight_decay, blog.decay_on, blog.grad_clip) == ([0.9, 0.95], 0.1, "matrices", 1.0)


def test_decay_on_all_decays_norms_and_biases_too():
    model = build_model(
        GPTConfig(vocab_size=16, context_length=8, d_model=8, n_layers=1, n_heads=2, bias=True, norm="layernorm")
    )
    vectors = {id(p) for p in model.parameters() if p.dim() < 2}
    assert vectors  # norm gains and biases exist
    for decay_on, decayed_vectors in (("all", True), ("matrices", False)):
        optimizer, _ = OptimConfig(weight_decay=0.01, decay_on=decay_on).build(model, 10)
        decayed = {id(p) for group in optimizer.param_groups if group["weight_decay"] > 0 for p in group["params"]}
        assert (vectors <= decayed) is decayed_vectors and (not vectors & decayed) is (not decayed_vectors)
        assert len(decayed) == (
            len(list(model.parameters())) if decay_on == "all" else sum(p.dim() >= 2 for p in model.parameters())
        )
    # a decayed bias shrinks with a zero gradient; under decay_on=matrices it does not move
    for decay_on, moves in (("all", True), ("matrices", False)):
        bias = torch.nn.Parameter(torch.ones(4))
        holder = torch.nn.Module()
        holder.bias = bias
        optimizer, _ = OptimConfig(lr=0.1, weight_decay=0.5, warmup_steps=0, decay_on=decay_on).build(holder, 10)
        bias.grad = torch.zeros(4)
        optimizer.step()
        assert bool((bias.detach() < 1).all()) is moves
    with pytest.raises(ConfigError, match="optim.decay_on='vectors' is not allowed: must be one of matrices, all"):
        OptimConfig(decay_on="vectors")


def test_checkpoints_from_before_decay_on_resume_as_matrices():
    model = {"vocab_size": 4}
    old = {"hyper_parameters": {"model": model, "optim": {"lr": 1e-3}}}
    check_resumable(old, "old.ckpt", model, {"lr": 1e-3, "decay_on": "matrices"}, 10, None)
    with pytest.raises(Exception, match="optim.decay_on='matrices' there, 'all' here"):
        check_resumable(old, "old.ckpt", model, {"lr": 1e-3, "decay_on": "all"}, 10, None)


def test_since_gpt2_settings_are_each_stated_with_their_source():
    doc = (REPO / "docs" / "experiments" / "since_gpt2.md").read_text()
    cfg = compose_train(["experiment=since_gpt2"])
    for key in (
        "optim.lr",
        "optim.betas",
        "optim.weight_decay",
        "optim.decay_on",
        "optim.warmup_steps",
        "optim.schedule",
        "optim.grad_clip",
        "data.batch_size",
        "model.context_length",
        "model.dropout",
        "trainer.max_steps",
        "trainer.val_check_interval",
        "trainer.precision",
        "data.split_unit",
        "data.dev_fraction",
        "data.test_fraction",
        "data/tokenizer",
    ):
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{key}`")), None)
        assert row is not None, f"{key} is not in docs/experiments/since_gpt2.md"
        if "/" not in key:  # the value in the table is the composed one
            value = OmegaConf.select(cfg, key)
            shown = re.search(r"\| `[^`]+` \| `([^`]+)` \|", row).group(1)
            assert shown == (str(list(value)) if OmegaConf.is_list(value) else str(value)), (key, shown, value)
        assert "000" in row


def test_blog_round1_is_003s_first_round_as_one_multirun():
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    with initialize_config_dir(str(REPO / "conf"), version_base="1.3"):
        cfg = compose("train", overrides=["experiment=blog_round1"], return_hydra_config=True)
    params = OmegaConf.to_container(cfg.hydra.sweeper.params)
    (batch,) = BasicSweeper.split_arguments(
        OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()]), None
    )
    assert sorted(tuple(job) for job in batch) == sorted(
        (f"data/tokenizer={t}", f"model.dropout={d}") for t in ("char", "bpe") for d in ("0.1", "0.2")
    )
    for job in batch:
        run = compose_train(["experiment=blog_round1", *job])
        tokenizer, dropout = (o.partition("=")[2] for o in job)
        assert (run.data.tokenizer.name, str(run.model.dropout)) == (tokenizer, dropout)
        assert (run.name, run.seed, run.data.name, run.data.dev, run.data.test_k) == (
            "blog_round1",
            0,
            "peps",
            "tail",
            2,
        )
        assert (
            run.trainer.max_steps,
            run.trainer.val_check_interval,
            run.data.batch_size,
            run.model.context_length,
        ) == (3000, 250, 32, 256)
    assert compose_train(["experiment=blog_round1", "data/tokenizer=bpe"]).data.tokenizer.vocab_size == 2048


def test_blog_1000_final_is_the_chosen_ablation_on_all_the_training_text():
    """003's recipe at 1,000 steps trains exactly as the ablation it was chosen from (round 1's BPE at dropout 0.1,
    cosine), without the dev slice, and registers its held-out scoring steps (every kept one) before training."""
    final = compose_train(["experiment=blog_1000_final"])
    chosen = compose_train(
        [
            "experiment=blog",
            "data/tokenizer=bpe",
            "model.dropout=0.1",
            "blog_ablation=cosine",
            "trainer.max_steps=1000",
            "trainer.precision=bf16-mixed",
        ]
    )
    for key in ("model", "optim", "lr", "seed"):
        assert final[key] == chosen[key], key
    for key in ("max_steps", "precision"):
        assert final.trainer[key] == chosen.trainer[key], key
    assert {k: v for k, v in final.data.items() if k != "dev"} == {k: v for k, v in chosen.data.items() if k != "dev"}
    assert (final.data.dev, chosen.data.dev, final.optim.schedule, final.model.position) == (
        "none",
        "tail",
        "cosine",
        "rope",
    )
    assert list(final.score_once.steps) == [250, 500, 750, 1000]
    assert final.score_once.recipe == "blog-1000-bpe-dropout0.1-cosine"
    assert all(s % final.checkpoint.keep_every_n_steps == 0 for s in final.score_once.steps)  # each step is kept


def test_blog_1000_final_fp32_is_the_same_recipe_in_fp32_registered_apart():
    """The fp32 registration changes the precision and the recipe's name, nothing else, so its seeds are the chosen
    recipe's, and a run's run.json says which of the two registrations it was trained under."""
    bf16 = OmegaConf.to_container(compose_train(["experiment=blog_1000_final"]))
    fp32 = OmegaConf.to_container(compose_train(["experiment=blog_1000_final_fp32"]))
    assert (bf16["trainer"]["precision"], fp32["trainer"]["precision"]) == ("bf16-mixed", "32-true")
    assert fp32["score_once"] == {
        "steps": [250, 500, 750, 1000],
        "recipe": "blog-1000-bpe-dropout0.1-cosine-fp32",
        "seeds": [],
    }
    assert fp32["name"] == "blog_1000_final_fp32"
    for cfg in (bf16, fp32):
        cfg["trainer"].pop("precision")
        cfg["score_once"].pop("recipe")
        cfg.pop("name")
    assert fp32 == bf16


def test_moonshot_holds_out_shakespeares_last_tenth():
    cfg = compose_train(["experiment=moonshot"])
    assert (cfg.name, cfg.data.name, cfg.data.corpus, cfg.data.path) == (
        "moonshot",
        "shakespeare",
        "file",
        "tinyshakespeare/input.txt",
    )
    assert (cfg.data.test_fraction, cfg.data.split_unit, cfg.data.dev, cfg.data.dev_fraction) == (
        0.1,
        "chars",
        "tail",
        0.1,
    )
    assert cfg.data.tokenizer.name == "char" and cfg.checkpoint.keep_every_n_steps == cfg.trainer.val_check_interval
    # the recipe chosen on the dev slice, and its pre-registered scoring step (a checkpoint is kept there)
    assert (cfg.model.dropout, cfg.trainer.max_steps, cfg.optim.schedule, cfg.optim.warmup_steps) == (
        0.0,
        600,
        "cosine",
        60,
    )
    assert list(cfg.score_once.steps) == [600] and cfg.score_once.recipe == "moonshot-600-dropout0"
    assert 600 % cfg.checkpoint.keep_every_n_steps == 0


def test_moonshot_peps_is_the_moonshot_recipe_on_blogs_data():
    """The same recipe on PEPs: every training and scoring setting of experiment=moonshot, the data of
    experiment=blog (two whole documents held out, the dev slice the last 10% of the rest)."""
    recipe = ["model", "optim", "trainer", "checkpoint", "score_once", "lr"]
    moonshot, peps, blog = (compose_train([f"experiment={e}"]) for e in ("moonshot", "moonshot_peps", "blog"))
    for key in recipe:
        assert peps[key] == moonshot[key], key
    assert peps.data == blog.data
    assert (peps.data.name, peps.data.dev, peps.data.tokenizer.name) == ("peps", "tail", "char")
    assert peps.name == "moonshot_peps"


@requires_data
def test_moonshot_splits_on_the_real_text():
    from tinygpt.data import TextDataModule

    cfg = compose_train(["experiment=moonshot", f"data.root={real_data_root()}"])
    text = (real_data_root() / cfg.data.path).read_text()
    datamodule = TextDataModule(cfg.data, context_length=cfg.model.context_length, seed=cfg.seed)
    datamodule.setup("fit")
    splits = datamodule.describe()["splits"]
    n = len(text)
    assert splits["test"]["chars"] == pytest.approx(0.1 * n, abs=2)  # the last 10%: held out
    assert splits["dev"]["chars"] == pytest.approx(0.1 * 0.9 * n, abs=2)  # the last 10% of the rest
    assert splits["train"]["chars"] + splits["dev"]["chars"] + splits["test"]["chars"] == n


def test_peps_tuned_is_the_searchs_best_trial_at_the_full_budget_on_all_the_training_text():
    """tinygpt-register's recipe from the PEPs search (docs/results/peps_search/): the best trial of the committed
    study, every searched value as the trial had it, at 1,000 steps, without the dev slice, its scoring steps and
    seeds registered before training."""
    optuna = pytest.importorskip("optuna")
    storage = f"sqlite:///{REPO / 'docs' / 'results' / 'peps_search' / 'study.db'}"
    best = optuna.load_study(study_name="peps_search", storage=storage).best_trial
    assert (best.number, round(best.value, 4)) == (26, 1.7937)
    tuned = compose_train(["experiment=peps_tuned"])
    trial = compose_train(
        [
            "experiment=blog",
            "data/tokenizer=bpe",
            *(f"{k}={v}" for k, v in best.params.items()),
            "trainer.max_steps=400",
        ]
    )
    for key in ("model", "optim", "lr", "seed"):
        assert tuned[key] == trial[key], key
    assert {k: v for k, v in tuned.data.items() if k != "dev"} == {k: v for k, v in trial.data.items() if k != "dev"}
    assert (tuned.data.dev, trial.data.dev, tuned.trainer.max_steps) == ("none", "tail", 1000)
    assert tuned.trainer.precision == trial.trainer.precision
    assert OmegaConf.to_container(tuned.score_once) == {
        "steps": [250, 500, 750, 1000],
        "seeds": [1, 2, 3],
        "recipe": "peps_tuned",
    }
    assert all(s % tuned.checkpoint.keep_every_n_steps == 0 for s in tuned.score_once.steps)  # each step is kept
