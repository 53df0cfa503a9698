"""μP (model.parametrization=mup): equal to the standard parametrization at the base width, its multipliers at
other widths, every switch it meets, the optimizer's groups, export, refusals, and the coordinate check."""

from __future__ import annotations

import math
import os
import subprocess
from dataclasses import replace

import pytest
import torch
from conftest import PYTHON, REPO

from tinygpt.analysis import coordcheck
from tinygpt.common.errors import ConfigError
from tinygpt.model import GPTConfig, KVCache
from tinygpt.model.mup import fold_into_sp
from tinygpt.train.optim import OptimConfig


def config(width: int = 64, parametrization: str = "mup", base: int | None = 64, **switches) -> GPTConfig:
    switches = {"vocab_size": 61, "context_length": 32, "n_layers": 2, "n_heads": 4, **switches}
    return GPTConfig(
        d_model=width,
        parametrization=parametrization,
        mup_base_width=base if parametrization == "mup" else None,
        **switches,
    )


def built(cfg: GPTConfig, seed: int = 0):
    torch.manual_seed(seed)
    return cfg.build()


def tokens(n: int = 4, t: int = 32, vocab: int = 61, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, vocab, (n, t), generator=torch.Generator().manual_seed(seed))


def train_steps(model, steps: int = 3, lr: float = 1e-2) -> list[float]:
    optimizer, schedule = OptimConfig(lr=lr, warmup_steps=0).build(model, 100)
    losses = []
    x = tokens()  # the same batch every step: its loss must fall
    for _ in range(steps):
        logits, aux = model(x[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten()) + aux
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return losses


def test_mup_at_its_base_width_is_the_standard_parametrization_bit_for_bit():
    sp, mup = built(config(parametrization="sp")), built(config())
    for (name, a), b in zip(sp.state_dict().items(), mup.state_dict().values(), strict=False):
        assert torch.equal(a, b), name
    x = tokens()
    assert torch.equal(sp(x).logits, mup(x).logits)
    assert train_steps(sp) == train_steps(mup)
    for a, b in zip(sp.parameters(), mup.parameters(), strict=False):
        assert torch.equal(a, b)


def test_sp_builds_no_multiplier_and_two_optimizer_groups_as_before():
    model = built(config(width=256, parametrization="sp"))
    assert model.output_multiplier is None and model.lr_multipliers == {}
    assert all(block.attention.scale is None for block in model.blocks)
    optimizer, _ = OptimConfig(lr=2e-3, weight_decay=0.1).build(model, 10)
    assert [(g["initial_lr"], g["weight_decay"]) for g in optimizer.param_groups] == [(2e-3, 0.1), (2e-3, 0.0)]


def test_multipliers_at_eight_times_the_base_width():
    cfg = config(width=512, mlp="gelu")
    model = built(cfg)
    m = 8
    assert model.output_multiplier == 1 / m
    # 1/head_dim with head_dim 128, times sqrt(16): 1/sqrt(16) at the base's head_dim of 16
    assert all(block.attention.scale == pytest.approx(4 / 128) for block in model.blocks)
    # hidden matrices: std init_std/sqrt(m) (fan_in 8x the base's), learning rate lr/m; the rest as at the base
    fc = model.blocks[0].mlp.fc.weight
    assert fc.std().item() == pytest.approx(0.02 / math.sqrt(m), rel=0.02)
    assert model.token_embedding.weight.std().item() == pytest.approx(0.02, rel=0.02)
    assert model.lr_multipliers["blocks.0.mlp.proj.weight"] == 1 / m
    assert "token_embedding.weight" not in model.lr_multipliers
    optimizer, _ = OptimConfig(lr=1e-2, weight_decay=0.1).build(model, 10)
    groups = {(g["initial_lr"], g["weight_decay"]): len(g["params"]) for g in optimizer.param_groups if g["params"]}
    # every block matrix at lr/m with its decay times m: lr·weight_decay per step at every width
    assert groups == {(1e-2, 0.1): 1, (1e-2, 0.0): 2 * 2 + 1, (1e-2 / m, 0.1 * m): 2 * 6}


def test_a_fixed_mlp_hidden_is_scaled_only_where_it_widens():
    model = built(config(width=256, mlp="gelu", mlp_hidden=128))
    assert model.lr_multipliers["blocks.0.mlp.fc.weight"] == 1 / 4  # fan_in d_model: 4x the base's
    assert model.lr_multipliers["blocks.0.mlp.proj.weight"] == 1.0  # fan_in 128 at every width


SWITCHES = {
    "rope": {},
    "learned": {"position": "learned"},
    "alibi": {"position": "alibi"},
    "none": {"position": "none"},
    "sinusoidal": {"position": "sinusoidal"},
    "layernorm+bias": {"norm": "layernorm", "bias": True},
    "post-norm": {"prenorm": False},
    "gelu": {"mlp": "gelu"},
    "moe": {"mlp": "moe", "n_experts": 4, "top_k": 2},
    "gqa": {"n_kv_heads": 2},
    "mqa": {"n_kv_heads": 1},
    "qk-norm": {"qk_norm": True},
    "untied": {"tie_embeddings": False},
}


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_every_switch_trains_under_mup_and_its_kv_cache_matches(switch):
    model = built(config(width=128, **SWITCHES[switch]))
    losses = train_steps(model)
    assert all(math.isfinite(loss) for loss in losses) and losses[-1] < losses[0]
    model.eval()
    x = tokens(n=2, t=12)
    with torch.no_grad():
        full = model(x).logits
        cache = KVCache.for_model(model, batch_size=2)
        first = model(x[:, :8], cache).logits
        rest = model(x[:, 8:], cache).logits
    torch.testing.assert_close(torch.cat([first, rest], dim=1), full, atol=1e-5, rtol=1e-5)
    assert model.flops_per_token() == 6 * model.num_parameters() + 12 * 2 * 32 * 128


@pytest.mark.parametrize("switches", [{}, {"qk_norm": True, "bias": True}, {"norm": "layernorm", "bias": True}])
def test_folding_the_multipliers_gives_a_standard_model_with_the_same_logits(switches):
    cfg = config(width=256, **switches)
    model = built(cfg)
    train_steps(model)
    plain = replace(cfg, parametrization="sp", mup_base_width=None).build()
    plain.load_state_dict(fold_into_sp(model.state_dict(), cfg))
    x = tokens()
    torch.testing.assert_close(plain(x).logits, model(x).logits, atol=1e-5, rtol=1e-4)


def test_export_to_transformers_gives_the_same_logits(tmp_path):
    pytest.importorskip("transformers")
    from tinygpt.export.export import build_hf_model, check_same_logits
    from tinygpt.export.families import choose_family

    for switches in ({}, {"qk_norm": True}, {"position": "learned", "norm": "layernorm", "mlp": "gelu"}):
        model = built(config(width=256, **switches))
        train_steps(model)
        model.eval()
        hf = build_hf_model(model, choose_family(model.config))
        assert check_same_logits(model, hf, "μP export") < 1e-4


@pytest.mark.parametrize(
    ("switches", "named"),
    [
        ({"mup_base_width": None}, "GPTConfig.mup_base_width=None"),
        ({"mup_base_width": 0}, "GPTConfig.mup_base_width=0"),
        ({"mup_base_width": 66}, "GPTConfig.mup_base_width=66"),  # 66 / 4 heads: no whole head_dim at the base
        ({"parametrization": "mu"}, "GPTConfig.parametrization='mu'"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(switches, named):
    fields = {"vocab_size": 61, "d_model": 128, "n_heads": 4, "parametrization": "mup", "mup_base_width": 64}
    with pytest.raises(ConfigError) as err:
        GPTConfig(**{**fields, **switches})
    assert str(err.value).startswith(named) and "\n" not in str(err.value)


def test_a_run_without_a_base_width_is_refused_in_one_line_and_writes_nothing(tmp_path, small_corpus):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [PYTHON, "scripts/train.py", "experiment=smoke", "data=textfile", f"data.path={small_corpus}"]
    argv += ["model.parametrization=mup", f"hydra.run.dir={tmp_path / 'run'}"]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 2
    assert "mup_base_width" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def synthetic_check(parametrizations=("sp", "mup"), widths=(64, 512), steps=10, lr=1e-2, output=True):
    """The coordinate check on a fixed random token stream (no corpus), depth 2, base 64."""
    stream = [(tokens(n=8, seed=s)[:, :-1], tokens(n=8, seed=s)[:, 1:]) for s in range(steps)]

    def build(parametrization, width):
        model = built(config(width=width, parametrization=parametrization))
        if not output:
            model.output_multiplier = None
        optimizer, schedule = OptimConfig(lr=lr, warmup_steps=0).build(model, 100)
        return model, optimizer, schedule

    return coordcheck.check(build, lambda: stream, widths, parametrizations, steps, grad_clip=1.0)


def logit_ratio(rows, parametrization, step=10):
    rms = {
        r["width"]: r["rms"]
        for r in rows
        if r["parametrization"] == parametrization and r["layer"] == "logits" and r["step"] == step
    }
    return max(rms.values()) / min(rms.values())


def test_logits_after_ten_steps_stay_put_under_mup_and_grow_under_sp():
    rows = synthetic_check()
    assert logit_ratio(rows, "mup") < 1.5
    assert logit_ratio(rows, "sp") > 2.0


def test_coordinate_check_slopes_are_flat_under_mup_and_climb_under_sp():
    rows = synthetic_check(widths=(64, 128, 256), steps=5)
    slopes = coordcheck.slopes(rows, step=5)
    for layer in coordcheck.LAYERS:
        assert abs(slopes[("mup", layer)]) < 0.3, (layer, slopes)
    assert min(slopes[("sp", layer)] for layer in ("attention", "mlp", "block")) > 0.5


def test_the_coordinate_check_sees_the_output_multiplier_removed():
    rows = synthetic_check(parametrizations=("mup",), widths=(64, 128, 256), steps=5, output=False)
    assert coordcheck.slopes(rows, step=5)[("mup", "logits")] > 0.5


@pytest.mark.slow
def test_tinygpt_coordcheck_writes_its_csv_and_plot(tmp_path, small_corpus):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [PYTHON, "scripts/coordcheck.py", "widths=[32,64,128]", "steps=3", f"out={tmp_path / 'cc'}"]
    argv += ["experiment=smoke", "data=textfile", f"data.path={small_corpus}", "model.context_length=32"]
    argv += ["data.batch_size=4", "model.n_layers=2"]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    rows = coordcheck.read_csv(tmp_path / "cc" / "coordcheck.csv")
    assert list(rows[0]) == list(coordcheck.COLUMNS)
    assert len(rows) == 2 * 3 * 4 * len(coordcheck.LAYERS)  # parametrizations x widths x (init + 3 steps) x layers
    assert (tmp_path / "cc" / "coordcheck.png").stat().st_size > 10_000
    assert "mup  logits" in done.stdout + done.stderr


def test_coordcheck_refuses_bad_widths_in_one_line_before_writing(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [PYTHON, "scripts/coordcheck.py", "widths=[64]", f"out={tmp_path / 'cc'}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "widths" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "cc").exists()
