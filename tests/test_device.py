"""tinygpt on a GPU: marked ``cuda`` / ``mps`` and skipped, naming the reason, where the device is absent.

What a GPU must show that the CPU suite cannot: every architecture switch's forward and backward on the device
against the CPU in float64 (within a stated tolerance), the chunked loss and int16 dropout masks there, cached ==
uncached generation, bit-exact resume with
``trainer.deterministic=true``, two jobs packed on one device by a sweep, compile, and bf16 / 16-mixed training.

``TINYGPT_DEVICE_TESTS_ON=cpu`` runs the ``cuda`` tests on the CPU instead (scripts/device_check.py --smoke, run
by tests/test_device_check.py), so this file is executed by the CPU suite and cannot rot while no GPU is at
hand; the comparisons then hold trivially and the point is that every line runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from model_variants import VARIANTS

from tinygpt.common.run_folder import DEV_BITS_PER_BYTE
from tinygpt.model import GPT, GPTConfig, generate
from tinygpt.model.kernels import dropout, linear_cross_entropy
from tinygpt.train.run import train

ROOT = Path(__file__).resolve().parents[1]
ON_CPU = os.environ.get("TINYGPT_DEVICE_TESTS_ON") == "cpu"
# float32 on the device (TF32 off: speed.tf32's default) against float64 on the CPU: the reductions' order differs
FP32_TOLERANCE = {"rtol": 1e-3, "atol": 1e-4}


def _available(kind: str) -> bool:
    return torch.cuda.is_available() if kind == "cuda" else torch.backends.mps.is_available()


@pytest.fixture(params=[pytest.param("cuda", marks=pytest.mark.cuda), pytest.param("mps", marks=pytest.mark.mps)])
def device(request) -> str:
    """The device under test: the parameter's kind, or the CPU under TINYGPT_DEVICE_TESTS_ON=cpu (cuda's tests
    only: running the same lines twice on the CPU would show nothing more)."""
    kind = request.param
    if ON_CPU:
        if kind != "cuda":
            pytest.skip("TINYGPT_DEVICE_TESTS_ON=cpu runs the cuda tests only")
        return "cpu"
    if not _available(kind):
        probe = "torch.cuda.is_available()" if kind == "cuda" else "torch.backends.mps.is_available()"
        pytest.skip(f"no {kind} device here ({probe} is False): scripts/device_check.py runs these on one")
    return kind


def _model(name: str, dtype: torch.dtype) -> GPT:
    fields = dict(vocab_size=61, context_length=32, d_model=32, n_layers=2, n_heads=4, dropout=0.0)
    torch.manual_seed(0)
    return GPT(GPTConfig(**{**fields, **VARIANTS[name]})).to(dtype)


def _loss_and_grads(model: GPT, tokens: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    out = model(tokens[:, :-1])
    loss = torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), tokens[:, 1:].flatten())
    if out.aux_loss is not None:
        loss = loss + out.aux_loss
    return loss, list(torch.autograd.grad(loss, list(model.parameters())))


@pytest.mark.parametrize("name", VARIANTS)
def test_every_switch_forward_and_backward_on_the_device_matches_the_cpu(device, name):
    tokens = torch.randint(0, 61, (4, 33), generator=torch.Generator().manual_seed(1))
    reference, reference_grads = _loss_and_grads(_model(name, torch.float64), tokens)
    loss, grads = _loss_and_grads(_model(name, torch.float32).to(device), tokens.to(device))
    torch.testing.assert_close(loss.double().cpu(), reference, **FP32_TOLERANCE)
    for got, expected in zip(grads, reference_grads, strict=True):
        torch.testing.assert_close(got.double().cpu(), expected, **FP32_TOLERANCE)


def test_the_chunked_loss_on_the_device_matches_the_cpu(device):
    """speed.loss=chunked (the head fused with the cross-entropy over chunks) against the full logits in float64."""
    generator = torch.Generator().manual_seed(3)
    hidden = torch.randn(300, 32, generator=generator, dtype=torch.float64)
    weight = torch.randn(61, 32, generator=generator, dtype=torch.float64) * 0.1
    targets = torch.randint(0, 61, (300,), generator=generator)
    reference = torch.nn.functional.cross_entropy(hidden @ weight.T, targets)
    h, w = (t.float().to(device).requires_grad_() for t in (hidden, weight))
    loss = linear_cross_entropy(h, w, targets.to(device), chunk=64)
    grad_h, grad_w = torch.autograd.grad(loss, (h, w))
    expected = torch.autograd.grad(
        torch.nn.functional.cross_entropy(hidden.requires_grad_() @ weight.requires_grad_().T, targets),
        (hidden, weight),
    )
    torch.testing.assert_close(loss.double().cpu(), reference, **FP32_TOLERANCE)
    torch.testing.assert_close(grad_h.double().cpu(), expected[0], **FP32_TOLERANCE)
    torch.testing.assert_close(grad_w.double().cpu(), expected[1], **FP32_TOLERANCE)


def test_int16_dropout_masks_on_the_device_keep_the_expectation(device):
    """speed.dropout=int16 on the device: the drop rate is p (rounded to 1/65,536) and the kept values are scaled
    so the mean is kept, within sampling error over 4M elements."""
    torch.manual_seed(0)
    x = torch.ones(2048, 2048, device=device)
    y = dropout(x, 0.2, True, "int16")
    dropped = (y == 0).float().mean().item()
    assert abs(dropped - 0.2) < 2e-3 and abs(y.mean().item() - 1.0) < 3e-3


@pytest.mark.parametrize("name", ["rope", "alibi", "gqa", "learned"])
def test_cached_and_uncached_generation_agree_on_the_device(device, name):
    model = _model(name, torch.float32).to(device).eval()
    prompt = torch.randint(0, 61, (2, 5), generator=torch.Generator().manual_seed(1)).to(device)
    cached = generate(model, prompt, 20, greedy=True, use_cache=True)
    uncached = generate(model, prompt, 20, greedy=True, use_cache=False)
    assert torch.equal(cached, uncached)


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    return checkpoint["state_dict"]


def test_resume_is_bit_exact_with_deterministic_mode(device, tiny_cfg, tmp_path, crash_at_step_6):
    """Stopped after step 4's checkpoint and resumed: the weights at step 8 equal the uninterrupted run's, bit for
    bit, with dropout on (the device's RNG state) and TF32 off."""
    overrides = ("model.dropout=0.1", f"trainer.accelerator={device}", "trainer.deterministic=true")
    stop_crashing = crash_at_step_6
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(tiny_cfg(*overrides), tmp_path / "stopped")
    stop_crashing()
    train(tiny_cfg(*overrides), tmp_path / "whole")
    record = train(tiny_cfg(*overrides), tmp_path / "stopped")
    assert record["resumed_from_step"] == 4 and record["provenance"][-1]["device_type"] == device
    whole, resumed = _weights(tmp_path / "whole"), _weights(tmp_path / "stopped")
    assert whole.keys() == resumed.keys()
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed"])
def test_mixed_precision_trains_on_the_device(device, precision, tiny_cfg, tmp_path):
    if ON_CPU and precision == "16-mixed":
        pytest.skip("16-mixed is a GPU precision (fp16 autocast with a loss scaler)")
    if device == "cuda" and precision == "bf16-mixed" and not torch.cuda.is_bf16_supported():
        pytest.skip("this CUDA device has no native bf16")
    runs = {}
    for name in ("32-true", precision):
        runs[name] = train(tiny_cfg(f"trainer.accelerator={device}", f"trainer.precision={name}"), tmp_path / name)
    assert runs[precision]["provenance"][-1]["precision"] == precision
    full, mixed = (runs[name]["final"][DEV_BITS_PER_BYTE] for name in ("32-true", precision))
    assert abs(mixed - full) < 0.05 * full  # the same training, in other rounding


def test_compile_trains_on_the_device_and_matches_eager(device, tiny_cfg, tmp_path):
    if ON_CPU:
        pytest.skip("inductor on the CPU costs a 15 s cold start; tests/test_speedups.py covers compile's graphs")
    runs = {
        flag: train(tiny_cfg(f"trainer.accelerator={device}", f"speed.compile={flag}"), tmp_path / flag)
        for flag in ("false", "true")
    }
    eager, compiled = (runs[flag]["final"][DEV_BITS_PER_BYTE] for flag in ("false", "true"))
    assert compiled == pytest.approx(eager, rel=1e-3)


def test_a_sweep_packs_two_jobs_on_one_device(device, small_corpus, tmp_path):
    """sweep.jobs_per_device=2 with one device: both jobs run on it at the same time (their leases overlap), in
    slots 0 and 1 of the same device."""
    if ON_CPU:
        pytest.skip("on the CPU, scripts/device_check.py --smoke's design card packs two jobs on one simulated device")
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "train.py"),
            "-m",
            "experiment=smoke",
            "data=textfile",
            f"data.path={small_corpus}",
            "seed=0,1",
            "trainer.max_steps=300",  # long enough that the second worker starts before the first job ends
            "sweep.jobs_per_device=2",
            f"trainer.accelerator={device}",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
            f"sweep.lease_dir={tmp_path / 'leases'}",
            "progress.style=lines",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "sweep").glob("*/placement.json"))]
    assert len(records) == 2
    assert {r["device"] for r in records} == {records[0]["pool"][0]} and {r["slot"] for r in records} == {0, 1}
    first, second = sorted(records, key=lambda r: r["acquired_at"])
    assert second["acquired_at"] < first["released_at"]  # packed: the two ran at once
