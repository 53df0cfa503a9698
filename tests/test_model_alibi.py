"""ALiBi (model.position=alibi): the slopes and biases by hand, no parameters, attention with the bias, training."""

import math

import pytest
import torch

from tinygpt.model import GPT, GPTConfig, KVCache
from tinygpt.model.gpt import CausalSelfAttention
from tinygpt.model.position import POSITIONS, ALiBiPositions, alibi_slopes
from tinygpt.train.run import train


def small(**overrides) -> GPTConfig:
    fields = dict(vocab_size=23, context_length=12, d_model=16, n_layers=2, n_heads=4, position="alibi")
    return GPTConfig(**{**fields, **overrides})


@pytest.mark.parametrize(
    "n_heads, exponents",
    [
        (1, [8]),  # 2^(-8i/n) with n = 1
        (2, [4, 8]),
        (4, [2, 4, 6, 8]),
        (8, [1, 2, 3, 4, 5, 6, 7, 8]),
        (6, [2, 4, 6, 8, 1, 3]),  # not a power of two: the 4 slopes of n=4, then every other slope of n=8
        (3, [4, 8, 2]),  # the 2 of n=2, then the first of n=4's odd-numbered ones
    ],
)
def test_slopes_are_the_papers_geometric_sequence(n_heads, exponents):
    assert alibi_slopes(n_heads).tolist() == [2.0**-e for e in exponents]


def test_bias_is_minus_slope_times_distance_on_a_tiny_case():
    positions = ALiBiPositions(small(n_heads=2, d_model=8))  # slopes 2^-4, 2^-8
    bias = positions.attention_bias(0, 3, 3)
    s0, s1 = 1 / 16, 1 / 256
    visible = torch.ones(3, 3, dtype=torch.bool).tril()
    assert bias.shape == (2, 3, 3)
    assert bias[0][visible].tolist() == [0, -s0, 0, -2 * s0, -s0, 0]  # rows: query 0, 1, 2; keys up to it
    assert bias[1][visible].tolist() == [0, -s1, 0, -2 * s1, -s1, 0]
    # continuing at position 5 with the cache's 12 keys: query 5 sees key 0 at distance 5
    cached = positions.attention_bias(5, 1, 12)
    assert cached.shape == (2, 1, 12) and cached[0, 0, 0].item() == -5 * s0 and cached[0, 0, 5].item() == 0


def test_attention_adds_the_bias_to_the_scores_before_the_causal_softmax():
    config = small(n_heads=2, d_model=8, n_kv_heads=1)
    torch.manual_seed(0)
    attention = CausalSelfAttention(config, 0).double().eval()
    x = torch.randn(1, 4, 8, dtype=torch.float64)
    bias = ALiBiPositions(config).attention_bias(0, 4, 4).double()
    got = attention(x, None, None, bias)
    q = attention.q_proj(x).view(1, 4, 2, 4).transpose(1, 2)
    k = attention.k_proj(x).view(1, 4, 1, 4).transpose(1, 2).expand(1, 2, 4, 4)  # MQA: one KV head for both
    v = attention.v_proj(x).view(1, 4, 1, 4).transpose(1, 2).expand(1, 2, 4, 4)
    scores = q @ k.transpose(-2, -1) / math.sqrt(4) + bias
    scores = scores.masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), float("-inf"))
    expected = attention.out_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(1, 4, 8))
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    # and the bias matters: without it the output differs
    assert not torch.allclose(attention(x), expected)


def test_alibi_has_no_parameters_and_no_checkpoint_entries():
    alibi, none, learned = (GPT(small(position=p)) for p in ("alibi", "none", "learned"))
    assert alibi.num_parameters() == none.num_parameters() == learned.num_parameters() - 12 * 16
    assert sorted(alibi.state_dict()) == sorted(none.state_dict())  # the slopes are a non-persistent buffer


def test_alibi_is_in_the_registry_and_changes_the_output():
    assert POSITIONS["alibi"] is ALiBiPositions
    idx = torch.randint(0, 23, (1, 10), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    alibi = GPT(small()).eval()
    torch.manual_seed(0)
    none = GPT(small(position="none")).eval()
    with torch.no_grad():
        assert not torch.allclose(alibi(idx).logits, none(idx).logits)
        cache = KVCache.for_model(alibi, 1)
        torch.testing.assert_close(
            torch.cat([alibi(idx[:, :4], cache).logits, alibi(idx[:, 4:], cache).logits], 1),
            alibi(idx).logits,
            rtol=0,
            atol=1e-5,
        )


def test_a_few_training_steps_with_alibi_run_and_lower_the_dev_score(tiny_cfg, tmp_path):
    result = train(tiny_cfg("model.position=alibi"), tmp_path)
    assert result["status"] == "finished" and result["config"]["model"]["position"] == "alibi"
    scores = [point["dev_loss"] for point in result["curve"]]
    assert len(scores) == 2 and all(math.isfinite(s) for s in scores) and scores[-1] < scores[0]
