"""MFU's denominator: a peak measured by the run itself unless the config gives one, without touching its RNG."""

from __future__ import annotations

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import tinygpt.train.callbacks.throughput as monitor
import tinygpt.train.peak as peak
from tinygpt.train.checkpoints import load_model
from tinygpt.train.run import train


def test_matmul_peak_is_a_rate_and_leaves_the_global_random_state_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    rate = peak.matmul_peak(torch.float32)
    assert torch.equal(torch.rand(3), expected)  # dropout and batches draw the same with or without it
    assert 1e8 < rate < 1e16


@pytest.mark.parametrize(
    "precision, dtype",
    [
        ("32-true", torch.float32),
        ("bf16-mixed", torch.bfloat16),
        ("bf16-true", torch.bfloat16),
        ("16-mixed", torch.float16),
        ("64-true", torch.float32),
    ],
)
def test_compute_dtype_of_each_precision(precision, dtype):
    assert peak.compute_dtype(precision) == dtype


def mfu_and_rate(run_dir) -> tuple[float, float]:
    events = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0}).Reload()
    return events.Scalars("train/mfu")[-1].value, events.Scalars("train/tokens_per_sec")[-1].value


def test_a_run_without_a_configured_peak_measures_one_in_its_compute_dtype(tiny_cfg, tmp_path, monkeypatch, capsys):
    asked = []
    monkeypatch.setattr(monitor, "matmul_rates", lambda dtype, device: asked.append((dtype, str(device))) or [1e9])
    train(tiny_cfg(), tmp_path)
    assert asked == [(torch.float32, "cpu")]
    assert "matmul peak, measured now: 1.0 GFLOP/s (32-true; set speed.peak_flops to fix it)" in capsys.readouterr().out
    model = load_model(tmp_path / "checkpoints" / "last.ckpt")[0]
    mfu, rate = mfu_and_rate(tmp_path)
    assert mfu == pytest.approx(rate * model.flops_per_token() / 1e9, rel=1e-5)


def test_a_peak_measured_on_a_busy_machine_says_so(tiny_cfg, tmp_path, monkeypatch, capsys):
    """The 1.4-to-91.5 GFLOP/s of a busy machine: the repeats' spread is reported, with what to do."""
    monkeypatch.setattr(monitor, "matmul_rates", lambda dtype, device: [91.5e9, 1.4e9, 60e9])
    train(tiny_cfg(), tmp_path)
    out = capsys.readouterr().out
    assert "the peak's 3 matmuls ranged from 1.4 to 91.5 GFLOP/s: something else is using the cores" in out
    monkeypatch.setattr(monitor, "matmul_rates", lambda dtype, device: [91.5e9, 80e9, 90e9])  # quiet: within 1.5x
    train(tiny_cfg(), tmp_path / "quiet")
    assert "something else is using the cores" not in capsys.readouterr().out


def test_a_configured_peak_is_used_and_nothing_is_measured(tiny_cfg, tmp_path, monkeypatch):
    monkeypatch.setattr(monitor, "matmul_rates", lambda *a: pytest.fail("measured although speed.peak_flops is set"))
    train(tiny_cfg("speed.peak_flops=2e9"), tmp_path)
    model = load_model(tmp_path / "checkpoints" / "last.ckpt")[0]
    mfu, rate = mfu_and_rate(tmp_path)
    assert mfu == pytest.approx(rate * model.flops_per_token() / 2e9, rel=1e-5)


def peaks(bf16: float, fp32: float, asked: list):
    def measured(dtype, device):
        asked.append(dtype)
        return [bf16 if dtype == torch.bfloat16 else fp32]

    return measured


def test_a_bf16_run_slower_than_fp32_on_this_machine_warns_once_with_both_peaks(tiny_cfg, tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(monitor, "matmul_rates", peaks(bf16=1.3e9, fp32=62e9, asked=asked))
    with pytest.warns(UserWarning, match="trainer.precision=bf16-mixed") as caught:
        train(tiny_cfg("trainer.precision=bf16-mixed"), tmp_path)
    assert asked == [torch.bfloat16, torch.float32]
    (warning,) = [w for w in caught if "trainer.precision=" in str(w.message)]
    assert str(warning.message) == (
        "trainer.precision=bf16-mixed: this machine multiplies torch.bfloat16 matrices at 1.3 GFLOP/s, 48x slower "
        "than float32 (62.0 GFLOP/s), so it has no native support for it (on a CPU: no AVX512_BF16 or AMX); "
        "trainer.precision=32-true trains faster here, with other rounding"
    )
    mfu, rate = mfu_and_rate(tmp_path)  # MFU stays against the run's own dtype
    assert mfu == pytest.approx(rate * load_model(tmp_path / "checkpoints" / "last.ckpt")[0].flops_per_token() / 1.3e9)


def test_a_bf16_run_faster_than_fp32_does_not_warn(tiny_cfg, tmp_path, monkeypatch, recwarn):
    monkeypatch.setattr(monitor, "matmul_rates", peaks(bf16=865e9, fp32=205e9, asked=[]))
    train(tiny_cfg("trainer.precision=bf16-mixed"), tmp_path)
    assert not [w for w in recwarn if "trainer.precision=" in str(w.message)]
    assert peak.slow_half_precision("bf16-mixed", 205e9, 205e9) is None  # equal is not slower
