"""The speed switches compute what the plain path computes: the fused chunked loss, explicit attention
dropout, the AdamW implementations, compilation's wiring, and their validation. Speed itself is measured by
scripts/bench_train.py, never here."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_train_run import train_losses

import tinygpt.model.kernels as attention_core
from tinygpt.model import GPT, GPTConfig
from tinygpt.model.generate import generate
from tinygpt.model.kernels import auto_chunk, linear_cross_entropy
from tinygpt.model.speed import SpeedConfig, optimizer_flags
from tinygpt.train.module import GPTModule
from tinygpt.train.optim import OptimConfig
from tinygpt.train.run import train

TINY = dict(vocab_size=61, context_length=24, d_model=32, n_layers=2, n_heads=4, dropout=0.0)


def plain_loss(hidden, weight, targets):
    return F.cross_entropy(F.linear(hidden, weight).flatten(0, -2).float(), targets.flatten())


@pytest.mark.parametrize("chunk", [7, 26, 1000, None])
def test_chunked_loss_and_gradients_equal_the_plain_path_in_fp32(chunk):
    torch.manual_seed(0)
    hidden = torch.randn(2, 13, 16, requires_grad=True)  # 26 tokens: chunk 7 leaves a remainder of 5
    weight = (0.5 * torch.randn(37, 16)).requires_grad_()
    targets = torch.randint(0, 37, (2, 13))
    ref = plain_loss(hidden, weight, targets)
    ref_grads = torch.autograd.grad(ref, (hidden, weight))
    out = linear_cross_entropy(hidden, weight, targets, chunk)
    grads = torch.autograd.grad(out, (hidden, weight))
    torch.testing.assert_close(out, ref, rtol=1e-6, atol=1e-6)
    for got, want in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("chunk", [7, None])
def test_chunked_loss_with_a_head_bias_gives_the_plain_loss_and_all_three_gradients(chunk):
    """The LSTM's head has a bias (tinygpt/model/lstm.py); its gradient is the column sum of softmax − onehot."""
    torch.manual_seed(0)
    hidden = torch.randn(2, 13, 16, requires_grad=True)
    weight = (0.5 * torch.randn(37, 16)).requires_grad_()
    bias = torch.randn(37, requires_grad=True)
    targets = torch.randint(0, 37, (2, 13))
    ref = F.cross_entropy(F.linear(hidden, weight, bias).flatten(0, -2), targets.flatten())
    ref_grads = torch.autograd.grad(ref, (hidden, weight, bias))
    out = linear_cross_entropy(hidden, weight, targets, chunk, bias=bias)
    grads = torch.autograd.grad(out, (hidden, weight, bias))
    torch.testing.assert_close(out, ref, rtol=1e-6, atol=1e-6)
    for got, want in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


def built(model: GPT, **switches) -> GPT:
    """The same weights in a model built to compute as ``switches`` say (the model's share of speed.*)."""
    twin = GPT(model.config, SpeedConfig(**switches))
    twin.load_state_dict(model.state_dict())
    return twin.train(model.training)


def test_chunked_loss_under_bf16_autocast_matches_the_plain_autocast_path():
    """Tolerance: the plain path rounds the head's weight gradient to bf16 once, the chunked one per chunk
    in fp32; 1% of the largest gradient entry covers bf16's 8 bits."""
    torch.manual_seed(0)
    hidden = torch.randn(64, 32, requires_grad=True)
    weight = (0.3 * torch.randn(50, 32)).requires_grad_()
    targets = torch.randint(0, 50, (64,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = plain_loss(hidden, weight, targets)
        out = linear_cross_entropy(hidden, weight, targets, 10)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, ref, rtol=2e-3, atol=2e-3)
    ref_grads = torch.autograd.grad(ref, (hidden, weight))
    grads = torch.autograd.grad(out, (hidden, weight))
    for got, want in zip(grads, ref_grads, strict=True):
        assert got.dtype == want.dtype == torch.float32
        assert (got - want).abs().max() <= 0.01 * want.abs().max()


def test_chunked_loss_needs_no_gradient_and_scales_by_the_incoming_one():
    torch.manual_seed(0)
    hidden, weight = torch.randn(20, 8), torch.randn(11, 8)
    targets = torch.randint(0, 11, (20,))
    with torch.inference_mode():
        got = linear_cross_entropy(hidden, weight, targets, 3)
    torch.testing.assert_close(got, plain_loss(hidden, weight, targets))
    hidden.requires_grad_()
    (3 * linear_cross_entropy(hidden, weight, targets, 3)).backward()
    want = torch.autograd.grad(3 * plain_loss(hidden, weight, targets), hidden)[0]
    torch.testing.assert_close(hidden.grad, want)
    with pytest.raises(ValueError, match="chunk=0"):
        linear_cross_entropy(hidden, weight, targets, 0)
    # 8 MiB blocks (V 2,048; characters: the whole batch), at least 4 tokens per unit of width (000's 50,257 x 256
    # head), at most 2**26 logits (a GPT-2 124M head), never under 32 tokens
    assert auto_chunk(2048, 192) == 1024 and auto_chunk(66, 192) == 31775
    assert auto_chunk(50257, 256) == 1024 and auto_chunk(50257, 768) == 1335 and auto_chunk(10**9, 8) == 32


@pytest.mark.parametrize("tied", [True, False])
def test_the_model_trained_through_the_fused_loss_gets_the_plain_gradients(tied):
    torch.manual_seed(0)
    model = GPT(GPTConfig(**TINY, tie_embeddings=tied))
    idx = torch.randint(0, 61, (3, 24))
    targets = idx.roll(-1, 1)
    ref = F.cross_entropy(model(idx).logits.flatten(0, 1), targets.flatten())
    ref_grads = torch.autograd.grad(ref, list(model.parameters()))
    hidden, _ = model.features(idx)
    out = linear_cross_entropy(hidden, model.head_weight, targets, 16)
    grads = torch.autograd.grad(out, list(model.parameters()))
    torch.testing.assert_close(out, ref, rtol=1e-6, atol=1e-6)
    for got, want in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


def test_explicit_attention_without_dropout_equals_sdpa():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 10, 8) for _ in range(3))
    torch.testing.assert_close(
        attention_core.explicit_attention(q, k, v, 0.0),
        F.scaled_dot_product_attention(q, k, v, is_causal=True),
        rtol=1e-5,
        atol=1e-6,
    )


def test_explicit_attention_dropout_drops_a_fraction_p_of_the_weights_and_rescales_the_rest():
    """With v the identity, the output is the dropped-out weight matrix itself."""
    torch.manual_seed(0)
    T, p = 64, 0.3
    q, k = torch.randn(4, 4, T, T), torch.randn(4, 4, T, T)
    v = torch.eye(T).expand(4, 4, T, T)
    dropped = attention_core.explicit_attention(q, k, v, p)
    weights = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    causal = torch.ones(T, T, dtype=torch.bool).tril().expand_as(weights)
    assert (dropped[~causal] == 0).all()
    zeroed = (dropped[causal] == 0).float().mean().item()
    assert zeroed == pytest.approx(p, abs=0.01)  # 8,320 causal weights per head, 16 heads
    kept = dropped != 0
    torch.testing.assert_close(dropped[kept], weights[kept] / (1 - p), rtol=1e-5, atol=1e-7)


def test_the_attention_switch_routes_training_dropout_and_only_that(monkeypatch):
    calls = []
    original = attention_core.explicit_attention
    monkeypatch.setattr(
        attention_core, "explicit_attention", lambda *args, **kw: calls.append(args[3]) or original(*args, **kw)
    )
    model = GPT(GPTConfig(**{**TINY, "dropout": 0.25}), SpeedConfig(attention="explicit", dropout="torch"))
    idx = torch.randint(0, 61, (2, 24))
    model.train()(idx)
    assert calls == [0.25, 0.25]  # each layer, with the configured p
    model.eval()(idx)
    built(model, attention="sdpa", dropout="torch").train()(idx)
    assert calls == [0.25, 0.25]


@pytest.mark.parametrize("impl", ["fused", "foreach"])
def test_adamw_implementations_give_the_for_loop_update(impl):
    def run(flags):
        torch.manual_seed(0)
        model = GPT(GPTConfig(**TINY))
        optimizer, _ = OptimConfig(warmup_steps=0).build(model, 10, flags)
        for step in range(3):
            idx = torch.randint(0, 61, (2, 24), generator=torch.Generator().manual_seed(step))
            F.cross_entropy(model(idx).logits.flatten(0, 1), idx.roll(-1, 1).flatten()).backward()
            optimizer.step()
            optimizer.zero_grad()
        return optimizer, model.state_dict()

    optimizer, got = run(optimizer_flags(SpeedConfig(optimizer=impl)))
    assert optimizer.defaults[impl] is True
    _, want = run(optimizer_flags(SpeedConfig(optimizer="for_loop")))
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-5, atol=1e-6)


def test_compile_compiles_one_block_graph_for_every_layer_in_training_only(monkeypatch):
    """speed.compile is regional: the blocks share one compiled graph (a second graph per layer would multiply
    the cold start by n_layers), training steps run it and give the eager loss and gradients, and validation,
    evaluation and generation stay eager (no graph of their own). Dynamo's "eager" backend keeps this to
    seconds; inductor's cold start is measured in docs/benchmarks/train.md."""
    from torch._dynamo.utils import counters

    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: real_compile(fn, backend="eager", fullgraph=True))
    torch._dynamo.reset()
    counters.clear()
    plain = GPTModule({**TINY, "n_layers": 3}, {}, 10)
    module = GPTModule({**TINY, "n_layers": 3}, {}, 10, speed={"compile": True})
    assert list(module.state_dict()) == list(plain.state_dict())
    module.load_state_dict(plain.state_dict())
    idx = torch.randint(0, 61, (2, 24))
    results = []
    for m in (plain, module):
        loss, _ = m.compute_loss(idx, idx.roll(-1, 1))
        results.append((loss, torch.autograd.grad(loss, list(m.parameters()))))
    assert counters["stats"]["unique_graphs"] == 1 and counters["stats"]["calls_captured"] > 0
    (ref, ref_grads), (loss, grads) = results
    torch.testing.assert_close(loss, ref, rtol=1e-6, atol=1e-6)
    for got, want in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    module.eval()
    with torch.no_grad():
        module.model(idx)
    generate(module.model, idx[:, :4], max_new_tokens=3)
    module.train()
    with torch.no_grad():
        module.model(idx)
    assert counters["stats"]["unique_graphs"] == 1
    # without the switch nothing is compiled
    assert all(block.compiled is None for block in plain.model.blocks)


def test_compile_compiles_a_family_without_blocks_whole(monkeypatch):
    """The LSTM has no repeated block: speed.compile compiles its trunk (features) instead of being ignored."""
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: compiled.append(fn) or fn)
    config = {"family": "lstm", "vocab_size": 61, "d_embed": 8, "d_model": 16}
    module = GPTModule(config, {}, 10, speed={"compile": True})
    assert compiled == [module.model.features]
    GPTModule(config, {}, 10)
    assert len(compiled) == 1  # nothing compiled without the switch


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"loss": "fast"}, ["speed.loss='fast'", "chunked, full"]),
        ({"attention": "flash"}, ["speed.attention='flash'", "sdpa, explicit"]),
        ({"projections": "one"}, ["speed.projections='one'", "fused, separate"]),
        ({"optimizer": "sgd"}, ["speed.optimizer='sgd'", "fused, foreach, for_loop"]),
        ({"loss_chunk": 0}, ["speed.loss_chunk=0", "positive"]),
        ({"compile": "yes"}, ["speed.compile='yes'", "true or false"]),
        ({"peak_flops": 0.0}, ["speed.peak_flops=0.0", "positive"]),
    ],
)
def test_bad_speed_switches_fail_naming_the_field(bad, words):
    with pytest.raises(ValueError) as err:
        SpeedConfig(**bad)
    assert all(w in str(err.value) for w in words)


def test_a_bad_switch_fails_before_the_run_writes_anything(tiny_cfg, tmp_path):
    with pytest.raises(ValueError, match="speed.loss='fast'"):
        train(tiny_cfg("speed.loss=fast"), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_run_with_the_fused_loss_logs_the_plain_losses(tiny_cfg, tmp_path, monkeypatch):
    """The whole run, fused loss and attention dropout against the plain path: the same per-step losses
    (the dropout switch is held fixed: its draws differ by design) and the same dev score."""
    import tinygpt.train.module as module_file

    fused_calls = []
    original = module_file.linear_cross_entropy
    monkeypatch.setattr(
        module_file, "linear_cross_entropy", lambda *a, **kw: fused_calls.append(a[-1]) or original(*a, **kw)
    )
    runs = {}
    for loss in ("full", "chunked"):
        record = train(tiny_cfg(f"speed.loss={loss}", "speed.loss_chunk=50", "model.dropout=0.1"), tmp_path / loss)
        runs[loss] = (train_losses(tmp_path / loss), record["best"]["dev_bits_per_byte"])
    assert fused_calls == [50] * 8  # the chunked run went through the fused loss, with its chunk
    assert sorted(runs["full"][0]) == sorted(runs["chunked"][0]) and len(runs["full"][0]) == 8
    for step, value in runs["full"][0].items():
        assert runs["chunked"][0][step] == pytest.approx(value, rel=1e-4)
    assert runs["chunked"][1] == pytest.approx(runs["full"][1], rel=1e-4)


@pytest.mark.parametrize("autocast", [False, True])
def test_validation_scores_exactly_what_the_full_logits_score(autocast):
    """validation_step runs the head on the scored rows only; the dev score must be the full-logits one."""
    from torch.utils.data import DataLoader

    from tinygpt.data.windows import SlidingWindowDataset
    from tinygpt.metrics import BitsPerByte

    torch.manual_seed(0)
    module = GPTModule({**TINY, "tie_embeddings": False}, {}, 10).eval()
    with torch.no_grad():  # logits of order 1, as in a trained model, so that rounding them would show
        module.model.lm_head.weight.mul_(100)
    ids = torch.randint(0, 61, (300,))
    dataset = SlidingWindowDataset(ids, torch.randint(1, 4, (300,)), torch.ones(300, dtype=torch.long), 24)
    reference = BitsPerByte()
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        for batch in DataLoader(dataset, batch_size=5):
            module.validation_step(batch, 0)
            reference.update(
                module.model(batch["input"]).logits,
                batch["target"],
                batch["scored"],
                batch["target_bytes"],
                batch["target_chars"],
            )
    got, want = module.dev_score.compute(), reference.compute()
    assert got["tokens"] == want["tokens"] == 299 and got["bytes"] == want["bytes"]
    for key in ("bits_per_byte", "loss", "bits_per_char"):
        assert float(got[key]) == pytest.approx(float(want[key]), rel=1e-6)


def _old_rope(x, cos, sin):
    """apply_rope as it was written before the complex form: real halves, stacked and interleaved again."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2).type_as(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rope_as_a_complex_product_gives_the_interleaved_real_formula(dtype):
    """Same values (fp32: to 1e-6; bf16: both round one fp32 result) and gradients, in the same interleaved
    convention, also on the non-contiguous (B, H, T, hd) views attention passes and on misaligned slices.
    bf16 gradients: the old formula rounded each of a pair's two terms to bf16 before adding them, the complex
    one rounds their fp32 sum once; so the new one is held to the fp32 gradient at bf16's own tolerance (the
    old one misses it on 1.4% of the entries)."""
    from tinygpt.model.position import apply_rope, rope_angles

    torch.manual_seed(0)
    cos, sin = rope_angles(16, 40)
    for x in (torch.randn(2, 40, 3, 16).transpose(1, 2), torch.randn(2, 3, 40, 17)[..., 1:]):
        x = x.to(dtype).requires_grad_()
        got, want = apply_rope(x, cos, sin), _old_rope(x, cos, sin)
        assert got.dtype == dtype and got.shape == x.shape
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
        grad = torch.randn_like(got)
        exact = torch.autograd.grad(_old_rope(x.float(), cos, sin), x, grad.float())[0]
        if dtype == torch.float32:
            torch.testing.assert_close(torch.autograd.grad(got, x, grad)[0], exact, rtol=1e-6, atol=1e-6)
        else:  # bf16's own tolerance (rtol 1.6e-2)
            torch.testing.assert_close(torch.autograd.grad(got, x, grad)[0], exact.to(dtype))
    # the pair (x0, x1) = (1, 0) at position 1 turns by theta_0 = 1 rad into (cos 1, sin 1); pair 1 stays put
    v = torch.tensor([[1.0, 0.0, 0.0, 1.0]])
    torch.testing.assert_close(
        apply_rope(v, *(t[1:2] for t in rope_angles(4, 2))),
        torch.tensor([[0.5403023, 0.8414710, -0.0099998, 0.9999500]]),
    )


def _formula_rms_norm(x, weight, eps):
    """RMSNorm as it was written before its backward was: autograd's record of the formula is the reference."""
    x32 = x.float()
    return weight * (x32 / torch.sqrt(x32.pow(2).mean(dim=-1, keepdim=True) + eps)).type_as(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rmsnorm_written_out_backward_gives_the_formulas_values_and_gradients(dtype):
    """tinygpt/model/gpt.py's _RMSNormFunction against autograd through the formula, on (B, T, d) input and
    on a non-contiguous (B, T, heads, head_dim) view as QK-norm gets it. fp32: to 1e-5 relative (rsqrt
    against a division by sqrt). bf16 input: the values and the gain's gradient at bf16's tolerance; x's
    gradient against the exact one (the formula on x in fp32), within bf16 rounding of its largest entry: the
    formula's autograd rounds g·w to bf16 before the norm's backward (its type_as), the written-out backward
    keeps it in fp32 and rounds once at the end, so the two differ by more than either differs from exact."""
    from tinygpt.model.gpt import RMSNorm

    torch.manual_seed(0)
    norm = RMSNorm(16, eps=1e-6)
    norm.weight.data = torch.randn(16)
    for x in (torch.randn(3, 10, 16) * 3, torch.randn(3, 4, 10, 16).transpose(1, 2)):
        x = x.to(dtype).requires_grad_()
        got, want = norm(x), _formula_rms_norm(x, norm.weight, 1e-6)
        assert got.shape == x.shape and got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
        grad = torch.randn_like(got)
        got_grads = torch.autograd.grad(got, (x, norm.weight), grad)
        want_grads = torch.autograd.grad(want, (x, norm.weight), grad)
        for g, w in zip(got_grads, want_grads, strict=True):
            assert g.dtype == w.dtype
        if dtype == torch.float32:
            for g, w in zip(got_grads, want_grads, strict=True):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
        else:
            torch.testing.assert_close(got_grads[1], want_grads[1])
            exact = torch.autograd.grad(_formula_rms_norm(x.float(), norm.weight, 1e-6), x, grad)[0].float()
            scale = exact.abs().max().item()
            torch.testing.assert_close(got_grads[0].float(), exact, rtol=1.6e-2, atol=4e-3 * scale)
    # the weight alone needs a gradient (frozen input), and a frozen gain leaves only the input's
    x = torch.randn(5, 16)
    assert torch.autograd.grad(norm(x).sum(), norm.weight)[0].shape == (16,)
    frozen = RMSNorm(16).requires_grad_(False)
    xg = torch.randn(5, 16, requires_grad=True)
    torch.testing.assert_close(
        torch.autograd.grad(frozen(xg).sum(), xg)[0],
        torch.autograd.grad(_formula_rms_norm(xg, frozen.weight, frozen.eps).sum(), xg)[0],
        rtol=1e-5,
        atol=1e-6,
    )


class _CopyCounter(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts the copies (clone, copy_) of tensors with `numel` elements in what it sees run."""

    def __init__(self, numel: int):
        super().__init__()
        self.numel, self.copies = numel, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in (torch.ops.aten.clone.default, torch.ops.aten.copy_.default) and args[0].numel() == self.numel:
            self.copies += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("qk_norm", [False, True])
def test_rope_returns_the_projections_gradients_without_a_copy(qk_norm):
    """RoPE (and QK-norm) run on the (B, T, heads, head_dim) views of the projections: backward hands q's and
    k's gradients to the projections in their own (B, T, width) memory order, where RoPE on the transposed views
    returned them in (B, heads, T) order and each cost one copy per layer. The values are checked against the
    reference formula by the RoPE and export tests."""
    from tinygpt.model.gpt import CausalSelfAttention
    from tinygpt.model.position import rope_angles

    torch.manual_seed(0)
    layer = CausalSelfAttention(GPTConfig(**{**TINY, "position": "rope", "qk_norm": qk_norm}), 0)
    x = torch.randn(3, 24, 32, requires_grad=True)
    cos, sin = rope_angles(8, 24)
    out = layer(x, (cos, sin))
    counter = _CopyCounter(x.numel())
    with counter:
        out.backward(torch.randn_like(out))
    assert counter.copies == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("variant", ["rope", "gqa", "gpt2_style", "moe", "qk_norm"])
def test_fused_projections_give_the_separate_loss_and_gradients(variant, dtype):
    """speed.projections=fused (one matmul for q/k/v and for SwiGLU's gate/up) against separate Linears.
    Tolerance: fp32 1e-5 relative (float rounding of a differently blocked matmul); bf16 autocast: the loss to
    1e-2 and each gradient within 2% of its largest entry (bf16's 8 bits, rounded in a different order)."""
    from model_variants import VARIANTS

    torch.manual_seed(0)
    model = GPT(GPTConfig(**{**TINY, **VARIANTS[variant]}))
    idx = torch.randint(0, 61, (3, 24))
    results = {}
    for projections in ("separate", "fused"):
        model = built(model, projections=projections)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            out = model(idx)
            loss = F.cross_entropy(out.logits.flatten(0, 1).float(), idx.roll(-1, 1).flatten()) + out.aux_loss
        results[projections] = (loss, torch.autograd.grad(loss, list(model.parameters())))
    attn, mlp = model.blocks[0].attention, model.blocks[0].mlp
    assert attn.project == attn._fused_projections and (getattr(mlp, "fused", True) or variant == "gpt2_style")
    (loss, grads), (ref, ref_grads) = results["fused"], results["separate"]
    if dtype == torch.float32:
        torch.testing.assert_close(loss, ref, rtol=1e-5, atol=1e-6)
        for got, want in zip(grads, ref_grads, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    else:
        torch.testing.assert_close(loss, ref, rtol=1e-2, atol=1e-2)
        for got, want in zip(grads, ref_grads, strict=True):
            assert (got - want).abs().max() <= 0.02 * want.abs().max() + 1e-6


def test_fused_projections_route_through_one_matmul_and_keep_the_state_dict(monkeypatch):
    calls = []
    original = F.linear
    monkeypatch.setattr(F, "linear", lambda x, w, b=None: calls.append(w.shape[0]) or original(x, w, b))
    plain = GPTModule(TINY, {}, 10, speed={"projections": "separate"})
    module = GPTModule(TINY, {}, 10, speed={"projections": "fused"})
    assert list(module.state_dict()) == list(plain.state_dict())
    idx = torch.randint(0, 61, (2, 24))
    module.model(idx)
    hidden = module.model_config.resolved_mlp_hidden
    assert calls.count(3 * 32) == 2 and calls.count(2 * hidden) == 2  # per layer: one qkv, one gate/up
    calls.clear()
    plain.model(idx)
    assert 3 * 32 not in calls and 2 * hidden not in calls


@pytest.mark.parametrize("variant", ["rope", "gqa", "gpt2_style", "qk_norm"])
def test_the_trunk_traces_as_one_graph_for_compile(variant):
    """speed.compile's trunk (RoPE as a complex product, fused projections, explicit attention dropout) traces
    into one graph with no breaks (fullgraph=True fails on any), and the traced trunk gives the eager loss and
    gradients. Dynamo's "eager" backend checks the tracing in seconds; inductor's code generation is measured
    in docs/benchmarks/train.md, not here."""
    from model_variants import VARIANTS

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = GPT(GPTConfig(**{**TINY, **VARIANTS[variant], "dropout": 0.1}), SpeedConfig())
    idx = torch.randint(0, 61, (3, 24))
    results = []
    for features in (model.features, torch.compile(model.features, backend="eager", fullgraph=True)):
        torch.manual_seed(1)
        hidden, aux = features(idx)
        loss = linear_cross_entropy(hidden, model.head_weight, idx.roll(-1, 1)) + aux
        results.append((loss, torch.autograd.grad(loss, list(model.parameters()))))
    (ref, ref_grads), (loss, grads) = results
    torch.testing.assert_close(loss, ref, rtol=1e-6, atol=1e-6)
    for got, want in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


class _CastCounter(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts the fp32 -> bf16 copies of activations of a given width (d_model) in what it sees run."""

    def __init__(self, width: int):
        super().__init__()
        self.width, self.casts = width, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        x = args[0] if args else None
        if func is torch.ops.aten._to_copy.default and kwargs.get("dtype") == torch.bfloat16:
            if x.dtype == torch.float32 and x.dim() == 3 and x.shape[-1] == self.width:
                self.casts += 1
        return func(*args, **kwargs)


@pytest.mark.parametrize("prenorm", [True, False])
@pytest.mark.parametrize("variant", ["rope", "gpt2_style", "moe"])
def test_under_bf16_autocast_each_sublayer_input_is_cast_once_and_the_forward_is_unchanged(
    variant, prenorm, monkeypatch
):
    """tinygpt/model/gpt.py's to_autocast_dtype: one cast of each sublayer's (B, T, d) input (two per block)
    where autocast's Linears made one per projection (q, k, v; SwiGLU's gate and up), the same logits to the
    bit, and gradients within bf16 rounding (2% of each gradient's largest entry, as for fused projections)."""
    from model_variants import VARIANTS

    import tinygpt.model.gpt as block

    torch.manual_seed(0)
    model = GPT(GPTConfig(**{**TINY, **VARIANTS[variant], "prenorm": prenorm}))
    idx = torch.randint(0, 61, (3, 24))
    results = {}
    for cast_once in (True, False):
        if not cast_once:  # what autocast alone does: every Linear casts its fp32 input
            monkeypatch.setattr(block, "to_autocast_dtype", lambda x: x)
        counter = _CastCounter(TINY["d_model"])
        with torch.autocast("cpu", dtype=torch.bfloat16), counter:
            logits = model(idx).logits
        loss = F.cross_entropy(logits.flatten(0, 1).float(), idx.roll(-1, 1).flatten())
        results[cast_once] = (counter.casts, logits, torch.autograd.grad(loss, list(model.parameters())))
    (casts, logits, grads), (casts_before, ref_logits, ref_grads) = results[True], results[False]
    n_layers = TINY["n_layers"]
    # + 1: the final norm's output, cast by the head; the MoE's router reads the MLP's input too
    assert casts == 2 * n_layers + 1
    assert casts_before > casts
    assert torch.equal(logits, ref_logits)
    for got, want in zip(grads, ref_grads, strict=True):
        assert (got - want).abs().max() <= 0.02 * want.abs().max() + 1e-6


@pytest.mark.parametrize("bf16", [False, True])
def test_the_chunked_loss_keeps_a_confident_predictions_gradient(bf16):
    """softmax - onehot at the target is p - 1, set from fp32: rounding p = 0.9999 to bf16 (1.0) first would
    give a gradient of 0 for a token the model predicts with 99.99%."""
    hidden = torch.zeros(1, 4, requires_grad=True)
    weight = torch.zeros(3, 4)
    weight[0, 0] = 1.0
    with torch.no_grad():
        hidden[0, 0] = 10.0  # logits (10, 0, 0): p(target 0) = 0.99991
    weight.requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = linear_cross_entropy(hidden, weight, torch.tensor([0]), 1)
    (grad_h,) = torch.autograd.grad(loss, hidden)
    p = torch.softmax(torch.tensor([10.0, 0.0, 0.0]), 0)
    # d loss / d h_0 = sum_v (p_v - onehot_v) W_v0 = p_0 - 1
    torch.testing.assert_close(grad_h[0, 0], p[0] - 1, rtol=1e-2, atol=1e-7)  # p - 1 = -9.08e-5


def sdpa_dtypes(monkeypatch) -> list[torch.dtype]:
    seen = []
    original = F.scaled_dot_product_attention

    def recorded(q, *args, **kwargs):
        seen.append(q.dtype)
        return original(q, *args, **kwargs)

    monkeypatch.setattr(attention_core.F, "scaled_dot_product_attention", recorded)
    return seen


@pytest.mark.parametrize(
    "setting, core", [("auto", torch.float32), ("float32", torch.float32), ("compute", torch.bfloat16)]
)
def test_attention_dtype_sets_the_cores_dtype_under_bf16_autocast(monkeypatch, setting, core):
    seen = sdpa_dtypes(monkeypatch)
    torch.manual_seed(0)
    model = GPT(GPTConfig(**TINY), SpeedConfig(attention_dtype=setting))
    idx = torch.randint(0, 61, (2, 24))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(idx).logits
    assert seen == [core, core]  # each layer's core, on this CPU
    assert logits.dtype == torch.bfloat16  # the projections and the head stay in autocast's dtype
    model(idx)  # without autocast nothing is cast: the core runs in fp32 as always
    assert seen[2:] == [torch.float32, torch.float32]


@pytest.mark.parametrize("setting, core", [("auto", torch.bfloat16), ("float32", torch.float32)])
def test_auto_keeps_the_written_out_dropout_core_in_bf16(monkeypatch, setting, core):
    """Training with int16 dropout writes the softmax out; auto leaves that core in bf16 (faster there)."""
    seen = []
    original = attention_core.explicit_attention

    def recorded(q, *args, **kwargs):
        seen.append(q.dtype)
        return original(q, *args, **kwargs)

    monkeypatch.setattr(attention_core, "explicit_attention", recorded)
    model = GPT(GPTConfig(**{**TINY, "dropout": 0.2}), SpeedConfig(attention_dtype=setting, dropout="int16")).train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model(torch.randint(0, 61, (2, 24)))
    assert seen == [core, core]


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_either_core_keeps_the_model_within_bf16_rounding_of_fp32_and_trains(dropout):
    """Under bf16 autocast the model's logits stay within bf16 rounding of the fp32 model's with either core
    (about 2e-3 here, from the bf16 projections and head), and the gradients reach every parameter in fp32."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(**{**TINY, "dropout": dropout})).eval()
    idx = torch.randint(0, 61, (2, 24))
    reference = model(idx).logits
    errors = {}
    for setting in ("float32", "compute"):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            errors[setting] = (built(model, attention_dtype=setting)(idx).logits.float() - reference).abs().max().item()
    assert errors["float32"] < 0.02 and errors["compute"] < 0.02, errors
    model = built(model, attention_dtype="float32").train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(idx).logits.float().flatten(0, 1), idx.roll(-1, 1).flatten())
    loss.backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in model.parameters())


@pytest.mark.parametrize("clip", [0.0, 0.5])
def test_gradient_clipping_logs_the_norm_before_clipping_and_leaves_gradients_alone_without_a_bound(clip, monkeypatch):
    """optim.grad_clip > 0 scales the gradients to that global norm; 0 (000's recipe) only measures it and makes no
    pass over the gradients (clip_grad_norm_ with an infinite bound would multiply each by 1.0). Either way the
    logged train/grad_norm is the norm before clipping."""
    module = GPTModule(TINY, {}, 10)
    torch.manual_seed(0)
    for p in module.parameters():
        p.grad = torch.randn_like(p)
    before = {name: p.grad.clone() for name, p in module.named_parameters()}
    want = torch.linalg.vector_norm(torch.cat([g.flatten() for g in before.values()]))
    logged = {}
    monkeypatch.setattr(module, "log", lambda name, value, **kw: logged.__setitem__(name, value))
    if not clip:  # no bound: no multiply at all
        monkeypatch.setattr(torch, "_foreach_mul_", lambda *a, **kw: pytest.fail("gradients were rescaled"))
    module.configure_gradient_clipping(None, gradient_clip_val=clip, gradient_clip_algorithm=None)
    torch.testing.assert_close(logged["train/grad_norm"], want, rtol=1e-6, atol=0)
    after = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in module.parameters()]))
    if clip:
        torch.testing.assert_close(after, torch.tensor(clip), rtol=1e-5, atol=0)
    else:
        assert all(torch.equal(p.grad, before[name]) for name, p in module.named_parameters())
