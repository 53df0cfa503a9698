"""trainer.precision=auto and the device a run trains on, with the device probes faked: CUDA with and without
native bf16, Apple's GPU, the CPU; an explicit precision is kept; a CPU run says so and records 32-true."""

from __future__ import annotations

import json

import pytest
import torch

from tinygpt.train.device_settings import choose
from tinygpt.train.run import train


@pytest.fixture
def probes(monkeypatch):
    def fake(cuda=False, bf16=False, mps=False):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)

    return fake


@pytest.mark.parametrize(
    ("devices", "kind", "precision"),
    [
        ({"cuda": True, "bf16": True, "mps": True}, "cuda", "bf16-mixed"),  # CUDA first, then MPS
        ({"cuda": True, "bf16": False}, "cuda", "16-mixed"),
        ({"mps": True}, "mps", "16-mixed"),
        ({}, "cpu", "32-true"),
    ],
)
def test_auto_picks_cuda_then_mps_then_the_cpu_and_its_precision(probes, devices, kind, precision):
    probes(**devices)
    choice = choose("auto", "auto")
    assert (choice.kind, choice.precision) == (kind, precision)
    assert (
        choice.why.startswith(f"device: {kind} (trainer.accelerator=auto: ")
        and "trainer.precision=auto: " in choice.why
    )


def test_an_explicit_accelerator_or_precision_is_kept(probes):
    probes(cuda=True, bf16=True)
    assert (choose("cpu", "auto").kind, choose("cpu", "auto").precision) == ("cpu", "32-true")
    assert choose("auto", "32-true").precision == "32-true"
    assert (
        choose("cpu", "bf16-mixed").why
        == "device: cpu (trainer.accelerator=cpu); precision: bf16-mixed (trainer.precision=bf16-mixed)"
    )


def test_a_cpu_run_says_where_it_trains_and_records_the_resolved_precision(tiny_cfg, tmp_path, capsys):
    cfg = tiny_cfg()
    assert cfg.trainer.precision == "auto"  # the default
    record = train(cfg, tmp_path)
    out = capsys.readouterr().out
    assert "[tinygpt] device: cpu (trainer.accelerator=auto: no CUDA or MPS device); precision: 32-true" in out
    saved = json.loads((tmp_path / "run.json").read_text())
    assert saved["config"]["trainer"]["precision"] == "32-true" == record["provenance"][0]["precision"]
    # each speed switch resolved for the CPU, stated once and recorded with the session
    assert out.count("[tinygpt] speed on cpu: ") == 1
    assert "dropout=int16 (auto: int16 masks on a CPU)" in out and "tf32=false (does nothing on cpu" in out
    session = saved["provenance"][0]
    assert session["speed"]["values"]["dropout"] == "int16" and session["speed"]["pin_memory"] is False
    assert session["device_choice"].startswith("device: cpu")
