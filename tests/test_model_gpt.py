"""The GPT itself: causality for every variant, training steps, the MoE loss, init, and config errors."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from model_variants import VARIANTS
from omegaconf import OmegaConf

from tinygpt.common.typed import typed
from tinygpt.model import GPT, GPTConfig, GPTOutput

BASE = dict(vocab_size=53, context_length=32, d_model=32, n_layers=2, n_heads=4)


def model_for(seed: int = 0, **overrides) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(**{**BASE, "init_std": 0.2, **overrides})).double()


@pytest.mark.parametrize("name", VARIANTS)
def test_changing_a_later_token_never_changes_earlier_logits(name):
    model = model_for(**VARIANTS[name]).eval()
    idx = torch.randint(0, 53, (2, 20), generator=torch.Generator().manual_seed(0))
    changed = idx.clone()
    changed[:, 12] = (idx[:, 12] + 1) % 53
    with torch.no_grad():
        before, after = model(idx).logits, model(changed).logits
    torch.testing.assert_close(after[:, :12], before[:, :12], rtol=0, atol=1e-12)
    assert not torch.allclose(after[:, 12:], before[:, 12:])  # the change does reach its own position


@pytest.mark.parametrize("name", ["no_residual", "postnorm", "postnorm_no_residual", "moe"])
def test_forward_and_backward_run(name):
    model = model_for(**VARIANTS[name], dropout=0.1).train()
    idx = torch.randint(0, 53, (2, 16))
    out = model(idx)
    assert isinstance(out, GPTOutput) and out.logits.shape == (2, 16, 53)
    loss = F.cross_entropy(out.logits.reshape(-1, 53), idx.roll(-1, 1).reshape(-1)) + out.aux_loss
    loss.backward()
    for name_, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name_


def test_dense_models_return_a_zero_aux_loss():
    aux = model_for()(torch.zeros(1, 4, dtype=torch.long)).aux_loss
    assert aux.dim() == 0 and aux.item() == 0.0


def test_moe_aux_loss_is_weighted_summed_over_layers_and_trains_the_router():
    idx = torch.randint(0, 53, (2, 16))
    model = model_for(mlp="moe", n_experts=4, top_k=2, moe_aux_loss_weight=0.5)
    aux = model(idx).aux_loss
    unweighted = model_for(mlp="moe", n_experts=4, top_k=2, moe_aux_loss_weight=1.0)(idx).aux_loss
    assert aux.item() == pytest.approx(0.5 * unweighted.item())
    assert 2 * 1.0 <= unweighted.item() <= 2 * 4  # each layer's loss lies in [1, n_experts]
    aux.backward()
    assert model.blocks[0].mlp.router.weight.grad.abs().sum() > 0


def test_dropout_is_active_only_in_training():
    model = model_for(dropout=0.3)
    idx = torch.randint(0, 53, (1, 16))
    model.train()
    assert not torch.equal(model(idx).logits, model(idx).logits)
    model.eval()
    assert torch.equal(model(idx).logits, model(idx).logits)


def test_dropout_also_acts_on_the_attention_weights():
    model = model_for(dropout=0.3).train()
    for block in model.blocks:
        block.drop = torch.nn.Identity()  # leave only the dropout inside scaled_dot_product_attention
    idx = torch.randint(0, 53, (1, 16))
    assert not torch.equal(model(idx).logits, model(idx).logits)


def test_init_normal_weights_zero_biases_unit_norms_and_tying():
    torch.manual_seed(0)
    model = GPT(GPTConfig(**{**BASE, "d_model": 256, "n_heads": 8, "bias": True, "norm": "layernorm"}))
    assert model.blocks[0].mlp.gate.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.token_embedding.weight.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.blocks[0].attention.q_proj.bias.abs().sum() == 0
    assert torch.equal(model.blocks[1].norm2.weight, torch.ones(256))
    assert model.blocks[1].norm2.bias.abs().sum() == 0
    assert model.lm_head is None  # tied: the unembedding is the embedding table, transposed
    stream = {}
    model.final_norm.register_forward_hook(lambda m, inp, out: stream.setdefault("x", out))
    logits = model(torch.tensor([[3, 5]])).logits
    torch.testing.assert_close(logits, stream["x"] @ model.token_embedding.weight.T)


def test_every_switch_changes_the_model():
    """A switch that is accepted but ignored would leave both the count and the logits unchanged."""
    base = dict(BASE, position="rope", n_kv_heads=2, mlp="moe", n_experts=4, top_k=2, dropout=0.0)
    flips = {
        "d_model": 48,
        "n_layers": 3,
        "n_heads": 8,
        "n_kv_heads": 1,
        "head_dim": 16,
        "rope_base": 100.0,
        "norm": "layernorm",
        "norm_eps": 0.5,
        "prenorm": False,
        "residual": False,
        "mlp": "swiglu",
        "mlp_hidden": 16,
        "n_experts": 5,
        "top_k": 1,
        "moe_aux_loss_weight": 0.5,
        "qk_norm": True,
        "tie_embeddings": False,
        "init_std": 0.05,
        "position": "learned",
        "vocab_size": 54,
    }
    idx = torch.randint(0, 53, (1, 24), generator=torch.Generator().manual_seed(0))

    def signature(**overrides):
        torch.manual_seed(0)
        model = GPT(GPTConfig(**{**base, **overrides})).eval()
        out = model(idx)
        return model.num_parameters(), out.logits[..., :53], out.aux_loss

    n0, logits0, aux0 = signature()
    for field, value in flips.items():
        _, logits, aux = signature(**{field: value})
        assert not torch.allclose(logits, logits0) or aux != aux0, f"{field}={value!r} changed nothing"
    # μP's two fields act together (a base width other than d_model changes the init, the scale, the logits):
    _, logits, _ = signature(parametrization="mup", mup_base_width=16)
    assert not torch.allclose(logits, logits0)
    # The three left. Biases start at zero, so at init they show only in the count:
    assert signature(bias=True)[0] > n0
    # dropout acts only in training, and with RoPE context_length moves the length limit.
    fields = {f.name for f in dataclasses.fields(GPTConfig)}
    assert set(flips) | {"bias", "dropout", "context_length", "parametrization", "mup_base_width"} == fields
    model = GPT(GPTConfig(**{**base, "dropout": 0.5})).train()
    assert not torch.equal(model(idx).logits, model(idx).logits)
    long_input = torch.zeros(1, 40, dtype=torch.long)
    with pytest.raises(ValueError, match="context_length=32"):
        GPT(GPTConfig(**base))(long_input)
    assert GPT(GPTConfig(**{**base, "context_length": 48}))(long_input).logits.shape == (1, 40, 53)


@pytest.mark.parametrize(
    "overrides, words",
    [
        ({"d_model": 30, "n_heads": 4}, ["n_heads=4", "divisor of d_model=30", "head_dim"]),
        ({"n_heads": 4, "n_kv_heads": 3}, ["n_kv_heads=3", "divisor of n_heads=4"]),
        ({"mlp": "moe", "n_experts": 4, "top_k": 5}, ["top_k=5", "at most n_experts=4"]),
        ({"position": "xpos"}, ["position='xpos'", "rope, learned, none, sinusoidal, alibi"]),
        ({"norm": "batchnorm"}, ["norm='batchnorm'", "layernorm, rmsnorm"]),
        ({"mlp": "relu"}, ["mlp='relu'", "gelu, gelu_exact, swiglu, moe"]),
        ({"dropout": 1.0}, ["dropout=1.0", "[0, 1)"]),
        ({"d_model": 0}, ["d_model=0", "positive"]),
        ({"n_layers": -1}, ["n_layers=-1", "positive"]),
        ({"head_dim": 7}, ["head_dim=7", "even", "rope"]),
        ({"vocab_size": -5}, ["vocab_size=-5"]),
    ],
)
def test_bad_config_fails_at_construction_naming_field_and_allowed_values(overrides, words):
    with pytest.raises(ValueError) as err:
        GPTConfig(**{**BASE, **overrides})
    for word in words:
        assert word in str(err.value)


def test_model_refuses_an_unfilled_vocabulary():
    with pytest.raises(ValueError, match="vocab_size=0.*tokenizer"):
        GPT(GPTConfig(**{**BASE, "vocab_size": 0}))


@pytest.mark.parametrize("mlp,approximate", [("gelu", "tanh"), ("gelu_exact", "none")])
def test_each_gelu_mlp_computes_its_own_form(mlp, approximate):
    """mlp=gelu is GPT-2's tanh approximation, mlp=gelu_exact the erf form: with the matrices taken out, each
    MLP is exactly its F.gelu, and the two differ where the forms do (4.7e-4 at x = 2.7)."""
    from torch import nn

    from tinygpt.model.gpt import make_mlp

    layer = make_mlp(GPTConfig(d_model=8, n_heads=2, mlp=mlp))
    layer.fc, layer.proj = nn.Identity(), nn.Identity()
    x = torch.linspace(-4, 4, 801, dtype=torch.float64)
    out, aux = layer(x)
    assert aux is None and torch.equal(out, F.gelu(x, approximate=approximate))
    other = F.gelu(x, approximate="none" if approximate == "tanh" else "tanh")
    assert (out - other).abs().max().item() > 4.5e-4


def test_a_model_node_or_dict_is_read_into_gptconfig_checking_keys_types_and_values():
    config = typed(GPTConfig, {"d_model": 64, "n_heads": 8, "vocab_size": 10}, "model")
    assert isinstance(config, GPTConfig) and (config.d_model, config.vocab_size) == (64, 10)
    assert config.resolved_head_dim == 8 and config.resolved_kv_heads == 8
    assert config.resolved_mlp_hidden == int(8 * 64 / 3)
    assert typed(GPTConfig, OmegaConf.create({"mlp": "gelu"}), "model").resolved_mlp_hidden == 4 * 192
    assert typed(GPTConfig, OmegaConf.create({"mlp": "gelu_exact"}), "model").resolved_mlp_hidden == 4 * 192
    with pytest.raises(ValueError, match=r"^model\.n_layer: Key 'n_layer' not in 'GPTConfig'; allowed: vocab_size"):
        typed(GPTConfig, {"n_layer": 4}, "model")  # unknown key (a typo of n_layers)
    with pytest.raises(ValueError, match=r"^model\.d_model: .*could not be converted to Integer"):
        typed(GPTConfig, {"d_model": "wide"}, "model")
    with pytest.raises(ValueError, match="n_kv_heads=3"):
        typed(GPTConfig, {"n_kv_heads": 3}, "model")
