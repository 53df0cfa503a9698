"""speed.dropout=int16: masks from 16-bit random slices drop a fraction p (rounded to 1/65,536) with every
expectation kept, forward and backward, deterministic under a seed, and routed to every dropout of a model."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import tinygpt.model.kernels as attention_core
import tinygpt.model.kernels as dropout_module
from tinygpt.model import GPT, GPTConfig
from tinygpt.model.kernels import LEVELS, dropout, int16_keep_mask, resolved
from tinygpt.model.lstm import CharLSTM, LSTMConfig
from tinygpt.model.speed import SpeedConfig

TINY = dict(vocab_size=61, context_length=24, d_model=32, n_layers=2, n_heads=4, dropout=0.25)


@pytest.mark.parametrize("p", [0.1, 0.2, 0.5])
def test_the_mask_drops_p_in_both_halves_of_each_word_and_the_scale_keeps_the_expectation(p):
    torch.manual_seed(0)
    keep, scale = int16_keep_mask((1000, 1000), p, torch.device("cpu"))
    drops = round(p * LEVELS)
    assert scale == LEVELS / (LEVELS - drops)
    flat = keep.flatten()
    # 500,000 draws each: the standard error of a rate is about 0.0007; the low and the high 16 bits of the
    # words are the even and odd elements, and each half must be unbiased (the sign bit of a word included)
    for half in (flat[0::2], flat[1::2]):
        assert (~half).float().mean().item() == pytest.approx(drops / LEVELS, abs=0.003)
    assert keep.float().mean().item() * scale == pytest.approx(1.0, abs=0.005)


def test_p_is_rounded_to_a_multiple_of_one_65536th():
    assert round(0.2 * LEVELS) / LEVELS == pytest.approx(0.2, abs=1 / LEVELS)
    keep, scale = int16_keep_mask((7,), 1e-6, torch.device("cpu"))  # rounds to 0: nothing dropped
    assert keep.all() and scale == 1.0


def test_int16_dropout_zeroes_the_dropped_scales_the_kept_and_backward_matches():
    torch.manual_seed(0)
    x = torch.randn(64, 33, requires_grad=True)  # an odd element count: the last word is half used
    out = dropout(x, 0.3, training=True, impl="int16")
    scale = LEVELS / (LEVELS - round(0.3 * LEVELS))
    kept = out != 0
    assert 0.25 < 1 - kept.float().mean().item() < 0.35
    torch.testing.assert_close(out[kept], x[kept] * scale)
    grad = torch.randn_like(x)
    (gx,) = torch.autograd.grad(out, x, grad)
    torch.testing.assert_close(gx, torch.where(kept, grad * scale, 0.0))


def test_int16_dropout_is_reproducible_from_the_seed_and_off_in_eval():
    x = torch.randn(10, 10)
    torch.manual_seed(3)
    a = dropout(x, 0.2, True, "int16")
    torch.manual_seed(3)
    b = dropout(x, 0.2, True, "int16")
    assert torch.equal(a, b)
    assert torch.equal(dropout(x, 0.2, False, "int16"), x)
    assert torch.equal(dropout(x, 1.0, True, "int16"), torch.zeros_like(x))


def test_int16_dropout_keeps_bf16():
    x = torch.randn(8, 8, dtype=torch.bfloat16)
    assert dropout(x, 0.2, True, "int16").dtype == torch.bfloat16


@pytest.mark.parametrize("additive", [False, True])
def test_int16_attention_dropout_drops_a_fraction_p_of_the_weights_and_rescales_the_rest(additive):
    """With v the identity, the output is the dropped-out weight matrix itself; the causal mask comes either
    built in or as a float mask (ALiBi's path)."""
    torch.manual_seed(0)
    T, p = 64, 0.3
    q, k = torch.randn(4, 4, T, T), torch.randn(4, 4, T, T)
    v = torch.eye(T).expand(4, 4, T, T)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    mask = torch.zeros(T, T).masked_fill(~causal, float("-inf")) if additive else None
    dropped = attention_core.explicit_attention(q, k, v, p, "int16", additive=mask)
    weights = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    causal = causal.expand_as(weights)
    assert (dropped[~causal] == 0).all()
    assert (dropped[causal] == 0).float().mean().item() == pytest.approx(p, abs=0.01)
    kept = dropped != 0
    scale = LEVELS / (LEVELS - round(p * LEVELS))
    torch.testing.assert_close(dropped[kept], weights[kept] * scale, rtol=1e-5, atol=1e-7)


def test_explicit_attention_with_a_float_mask_and_no_dropout_equals_sdpa():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 10, 8) for _ in range(3))
    bias = torch.randn(3, 10, 10).masked_fill(~torch.ones(10, 10, dtype=torch.bool).tril(), float("-inf"))
    torch.testing.assert_close(
        attention_core.explicit_attention(q, k, v, 0.0, additive=bias),
        F.scaled_dot_product_attention(q, k, v, attn_mask=bias),
        rtol=1e-5,
        atol=1e-6,
    )


def count_int16_masks(monkeypatch) -> list[tuple[int, ...]]:
    shapes = []
    original = dropout_module.int16_keep_mask

    def counted(shape, p, device):
        shapes.append(tuple(shape))
        return original(shape, p, device)

    monkeypatch.setattr(dropout_module, "int16_keep_mask", counted)
    monkeypatch.setattr(attention_core, "int16_keep_mask", counted)
    return shapes


@pytest.mark.parametrize("position", ["rope", "alibi"])
def test_speed_dropout_int16_reaches_every_dropout_of_the_gpt_in_training_only(monkeypatch, position):
    shapes = count_int16_masks(monkeypatch)
    model = GPT(GPTConfig(**TINY, position=position), SpeedConfig(dropout="int16"))
    idx = torch.randint(0, 61, (2, 24))
    model.train()(idx)
    # per layer: the attention weights (B, H, T, T), then the two sublayer outputs (B, T, d)
    assert shapes == [(2, 4, 24, 24), (2, 24, 32), (2, 24, 32)] * 2
    model.eval()(idx)
    GPT(GPTConfig(**TINY, position=position), SpeedConfig(dropout="torch")).train()(idx)
    assert len(shapes) == 6  # neither evaluation nor torch's dropout draws int16 masks


def test_speed_dropout_int16_reaches_the_lstm(monkeypatch):
    shapes = count_int16_masks(monkeypatch)
    model = CharLSTM(
        LSTMConfig(vocab_size=61, d_embed=8, d_model=16, n_layers=1, dropout=0.2), SpeedConfig(dropout="int16")
    )
    model.train()(torch.randint(0, 61, (2, 24)))
    assert shapes == [(2, 24, 16)]


def test_a_bad_dropout_switch_names_the_field():
    with pytest.raises(ValueError, match=r"speed.dropout='int8' is not allowed: must be one of auto, torch, int16"):
        SpeedConfig(dropout="int8")


def test_auto_is_int16_on_a_cpu_and_torch_elsewhere():
    assert SpeedConfig().dropout == "auto"
    assert resolved("auto", torch.device("cpu")) == "int16"
    assert resolved("auto", torch.device("meta")) == "torch"  # any other device: torch's fused kernels
    assert resolved("torch", torch.device("cpu")) == "torch"
    assert resolved("int16", torch.device("meta")) == "int16"


def test_the_default_model_trains_with_int16_masks_on_a_cpu(monkeypatch):
    shapes = count_int16_masks(monkeypatch)
    model = GPT(GPTConfig(**TINY), SpeedConfig())  # as training builds it
    model.train()(torch.randint(0, 61, (2, 24)))
    assert len(shapes) == 6
