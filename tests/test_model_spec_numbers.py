"""000's worked numbers: the norms, RoPE's relative positions, SwiGLU's width, MoE routing, KV bytes."""

import math

import pytest
import torch

from tinygpt.model import GPTConfig, kv_cache_bytes_per_token
from tinygpt.model.gpt import NORMS, GeluMLP, MoE, RMSNorm, SwiGLU, load_balancing_loss, route
from tinygpt.model.position import apply_rope, rope_angles

KiB, MiB, GiB = 2**10, 2**20, 2**30


def LayerNorm(d: int, bias: bool = True) -> torch.nn.Module:  # noqa: N802 - the layer norm model.norm=layernorm builds
    return NORMS["layernorm"](d, 1e-5, bias)


def rounded(t: torch.Tensor, places: int = 3) -> list[float]:
    return [round(v, places) for v in t.tolist()]


@pytest.mark.parametrize("shift", [0.0, 10.0])
def test_layer_norm_of_2_4_6_8_is_centered_and_ignores_a_shift(shift):
    x = torch.tensor([2.0, 4.0, 6.0, 8.0]) + shift
    assert rounded(LayerNorm(4)(x)) == [-1.342, -0.447, 0.447, 1.342]


@pytest.mark.parametrize("shift, expected", [(0.0, [0.365, 0.730, 1.095, 1.461]), (10.0, [0.791, 0.923, 1.055, 1.187])])
def test_rmsnorm_of_2_4_6_8_keeps_the_shift(shift, expected):
    x = torch.tensor([2.0, 4.0, 6.0, 8.0]) + shift
    assert rounded(RMSNorm(4)(x)) == expected


def test_layer_norm_without_bias_has_only_a_weight():
    assert [name for name, _ in LayerNorm(4, bias=False).named_parameters()] == ["weight"]
    assert [name for name, _ in RMSNorm(4).named_parameters()] == ["weight"]


def rotate_2d(v: torch.Tensor, position: int, radians_per_position: float = 0.5) -> torch.Tensor:
    """000's two-dimensional example: apply_rope with a one-pair angle table of 0.5 rad per position."""
    angle = torch.tensor([[radians_per_position * position]])
    return apply_rope(v[None, :], angle.cos(), angle.sin())[0]


def test_rope_two_dimensional_example():
    q, k = torch.tensor([1.0, 0.0]), torch.tensor([0.6, 0.8])
    assert rounded(rotate_2d(q, 2)) == [0.540, 0.841]
    assert rounded(rotate_2d(k, 5)) == [-0.959, -0.282]
    assert rounded(rotate_2d(q, 10)) == [0.284, -0.959]
    assert rounded(rotate_2d(k, 13)) == [0.414, 0.910]
    score = lambda m, n: round((rotate_2d(q, m) @ rotate_2d(k, n)).item(), 4)
    assert score(2, 5) == score(10, 13) == score(100, 103) == -0.7556  # only the distance matters
    assert score(5, 2) == 0.8404  # reversed order differs: direction is kept
    assert score(7, 7) == 0.6  # equal positions: the plain dot product


def test_rope_64_dimensional_example_seed_0():
    cos, sin = rope_angles(64, 2000)
    torch.manual_seed(0)
    q, k = torch.randn(64), torch.randn(64)
    score = lambda m, n: (apply_rope(q, cos[m], sin[m]) @ apply_rope(k, cos[n], sin[n])).item()
    # 000 prints 4 decimals; in float32 the score at 1503 is -8.28115, so compare to within the last digit.
    for m, n in ((3, 0), (503, 500), (1503, 1500)):
        assert score(m, n) == pytest.approx(-8.2811, abs=1e-4)
    assert score(0, 3) == pytest.approx(-10.7468, abs=1e-4)
    assert score(0, 0) == pytest.approx((q @ k).item()) == pytest.approx(-11.4345, abs=1e-4)


def test_rope_pair_speeds_for_a_64_dimensional_head():
    cos, sin = rope_angles(64, 2)
    per_position = torch.atan2(sin[1], cos[1])  # the angle each pair turns by in one position
    assert per_position[0].item() == pytest.approx(1.0)
    assert per_position[-1].item() == pytest.approx(0.000133, rel=0.01)
    assert 2 * math.pi / per_position[-1].item() == pytest.approx(47_000, rel=0.01)


def test_gelu_mlp_and_swiglu_have_equal_weights_at_width_768():
    hidden = GPTConfig(d_model=768, n_heads=12, mlp="swiglu").resolved_mlp_hidden
    assert hidden == 2048
    assert GPTConfig(d_model=768, n_heads=12, mlp="gelu").resolved_mlp_hidden == 3072
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(GeluMLP(768, 3072, bias=False)) == count(SwiGLU(768, hidden)) == 4_718_592


def test_moe_routing_of_the_worked_example():
    weights, chosen = route(torch.tensor([[2.0, -1.0, 0.5, 1.5]]), top_k=2)
    assert chosen.tolist() == [[0, 3]]
    assert rounded(weights[0], 2) == [0.62, 0.38]


def test_moe_layer_mixes_only_the_chosen_experts():
    torch.manual_seed(0)
    moe = MoE(d=4, hidden=8, n_experts=4, top_k=2)
    with torch.no_grad():
        moe.router.weight.zero_()
        moe.router.weight[:, 0] = torch.tensor([2.0, -1.0, 0.5, 1.5])  # router(x) = the scores for x = e0
    x = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    rows_seen = {}
    for e, expert in enumerate(moe.experts):
        expert.register_forward_hook(lambda m, inp, out, e=e: rows_seen.__setitem__(e, inp[0].shape[0]))
    out, _ = moe(x)
    w0, w3 = torch.softmax(torch.tensor([2.0, 1.5]), dim=0)
    expected = w0 * moe.experts[0](x)[0] + w3 * moe.experts[3](x)[0]
    torch.testing.assert_close(out, expected)
    assert rows_seen == {0: 1, 1: 0, 2: 0, 3: 1}  # experts 1 and 2 get no tokens to compute


def test_load_balancing_loss_is_one_when_balanced_and_n_experts_when_collapsed():
    n_experts = 4
    balanced_chosen = torch.tensor([[0, 1], [2, 3], [1, 0], [3, 2]])
    balanced = load_balancing_loss(torch.zeros(4, n_experts), balanced_chosen, n_experts)
    assert balanced.item() == pytest.approx(1.0)
    collapsed_logits = torch.tensor([[50.0, 0.0, 0.0, 0.0]]).repeat(6, 1)
    collapsed_chosen = torch.zeros(6, 1, dtype=torch.long)
    loss = load_balancing_loss(collapsed_logits, collapsed_chosen, n_experts)
    assert loss.item() == pytest.approx(n_experts)


@pytest.mark.parametrize(
    "kv_heads, per_token, at_8192, at_131072",
    [
        (32, 512 * KiB, 4 * GiB, 64 * GiB),  # plain multi-head attention
        (8, 128 * KiB, 1 * GiB, 16 * GiB),  # GQA, the actual model
        (1, 16 * KiB, GiB // 8, 2 * GiB),  # MQA
    ],
)
def test_kv_cache_bytes_llama3_8b_table(kv_heads, per_token, at_8192, at_131072):
    n = kv_cache_bytes_per_token(n_layers=32, n_kv_heads=kv_heads, head_dim=128, bytes_per_number=2)
    assert (n, n * 8192, n * 131072) == (per_token, at_8192, at_131072)


def test_kv_cache_bytes_from_configs():
    gpt2 = GPTConfig(vocab_size=50257, context_length=1024, d_model=768, n_layers=12, n_heads=12)
    assert kv_cache_bytes_per_token(gpt2, bytes_per_number=4) == 73_728
    assert kv_cache_bytes_per_token(gpt2, bytes_per_number=4) * 1024 == 72 * MiB
    llama = GPTConfig(vocab_size=128256, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8)
    assert kv_cache_bytes_per_token(llama, bytes_per_number=2) == 128 * KiB
    with pytest.raises(ValueError, match="n_kv_heads"):
        kv_cache_bytes_per_token(n_layers=32, head_dim=128)
