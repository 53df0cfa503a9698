"""speed.malloc (tinygpt/train/device_settings.py): keep stops the page faults of large tensors and changes no number.

The setting belongs to a process, so the behaviour is checked in fresh subprocesses, one per value; the speed it
buys is measured in scripts/bench_train.py, never here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tinygpt.model.speed import SpeedConfig
from tinygpt.train import device_settings as malloc

ROOT = Path(__file__).resolve().parents[1]

# Eight AdamW steps of a GPT whose 4,096 x 2,048 fp32 logits block (the fused loss in one chunk of 4,096 tokens,
# set here: the automatic chunk is smaller) is exactly 32 MiB, above glibc's largest dynamic mmap threshold, so
# each step maps it afresh unless the memory is kept. Prints the losses, a checksum of the weights and the minor
# page faults of the last six steps.
STEPS = """
import json, resource, sys, torch
from tinygpt.train.module import GPTModule
model = dict(vocab_size=2048, context_length=128, d_model=64, n_layers=1, n_heads=2, dropout=0.0)
optim = dict(lr=1e-3, warmup_steps=0, schedule="constant")
torch.manual_seed(0)
module = GPTModule(model, optim, 8, speed={"malloc": sys.argv[1], "loss_chunk": 4096})  # one 32 MiB block
opt = torch.optim.AdamW(module.parameters(), lr=1e-3)
x, y = torch.randint(0, 2048, (2, 32, 128)).unbind(0)
losses = []
for step in range(8):
    if step == 2:
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    loss, _ = module.compute_loss(x, y)
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    losses.append(loss.item())
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
checksum = sum(p.double().sum().item() for p in module.parameters())
print(json.dumps({"losses": losses, "checksum": checksum, "faults": faults}))
"""


def run_steps(mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", STEPS, mode], cwd=ROOT, capture_output=True, text=True, check=True, timeout=300
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(malloc.glibc_mallopt() is None, reason="speed.malloc=keep needs glibc (Linux)")
def test_keep_removes_the_page_faults_and_changes_no_number():
    system, keep = run_steps("system"), run_steps("keep")
    assert keep["losses"] == system["losses"] and keep["checksum"] == system["checksum"]  # bit-identical
    # system faults every page of each 32 MiB block in again (8,192 pages a block, several blocks a step)
    assert system["faults"] > 6 * 8192
    assert keep["faults"] * 5 < system["faults"]  # measured: 8,193 against 110,000 (one late growth of the heap)


def test_auto_is_keep_with_glibc_and_system_without(monkeypatch):
    monkeypatch.setattr(malloc, "glibc_mallopt", lambda: lambda parameter, value: 1)
    assert malloc.resolve_malloc("auto") == "keep"
    monkeypatch.setattr(malloc, "glibc_mallopt", lambda: None)
    assert malloc.resolve_malloc("auto") == "system"
    assert malloc.resolve_malloc("system") == "system"
    with pytest.raises(ValueError, match="speed.malloc=keep is not allowed on .*glibc"):
        malloc.resolve_malloc("keep")


def test_apply_sets_both_thresholds_once_and_system_restores_them(monkeypatch):
    calls = []

    def mallopt(parameter, value):
        calls.append((parameter, value))
        return 1

    monkeypatch.setattr(malloc, "glibc_mallopt", lambda: mallopt)
    monkeypatch.setattr(malloc, "_applied", None)
    assert malloc.apply_malloc("system") == "system" and calls == []  # glibc left untouched
    assert malloc.apply_malloc("auto") == "keep"
    assert malloc.apply_malloc("keep") == "keep"  # idempotent
    assert calls == [(malloc.M_MMAP_THRESHOLD, malloc.KEEP_BYTES), (malloc.M_TRIM_THRESHOLD, malloc.KEEP_BYTES)]
    assert malloc.apply_malloc("system") == "system"
    assert calls[2:] == [(malloc.M_MMAP_THRESHOLD, 128 * 1024), (malloc.M_TRIM_THRESHOLD, 128 * 1024)]


def test_a_refused_value_fails_naming_the_switch(monkeypatch):
    monkeypatch.setattr(malloc, "glibc_mallopt", lambda: lambda parameter, value: 0)
    monkeypatch.setattr(malloc, "_applied", None)
    with pytest.raises(RuntimeError, match="speed.malloc=keep: glibc's mallopt"):
        malloc.apply_malloc("keep")


def test_a_bad_value_fails_naming_the_field():
    with pytest.raises(ValueError, match="speed.malloc='jemalloc' is not allowed: must be one of auto, keep, system"):
        SpeedConfig(malloc="jemalloc")


def test_bench_train_refuses_to_ab_a_per_process_switch():
    out = subprocess.run(
        [sys.executable, "scripts/bench_train.py", "--ab", "speed.malloc=keep,system"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "speed.malloc" in out.stderr and "per process" in out.stderr
