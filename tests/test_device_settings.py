"""Each speed switch resolved for the device a run trains on (tinygpt/train/device_settings.py), with the device
probes faked: auto's per-device values, the switches that do nothing there, TF32 and cuBLAS's deterministic
workspace on CUDA only, pinned batches on CUDA only, and a module built for CUDA carrying the resolved values."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch

from tinygpt.data import build_datamodule
from tinygpt.model.gpt import CausalSelfAttention
from tinygpt.model.kernels import Dropout
from tinygpt.model.speed import SpeedConfig
from tinygpt.train import device_settings
from tinygpt.train.device_settings import CUBLAS_DETERMINISTIC, exactness, resolve
from tinygpt.train.module import build_module
from tinygpt.train.schema import parse_run_config


def test_auto_switches_resolve_per_device():
    cpu, cuda, mps = (resolve(SpeedConfig(), kind) for kind in ("cpu", "cuda", "mps"))
    assert (cpu.speed.dropout, cpu.speed.attention_dtype, cpu.speed.malloc) == ("int16", "auto", "keep")  # glibc
    assert (cuda.speed.dropout, cuda.speed.attention_dtype, cuda.speed.malloc) == ("torch", "compute", "system")
    assert (mps.speed.dropout, mps.speed.attention_dtype, mps.speed.malloc) == ("torch", "compute", "system")
    assert (cpu.pin_memory, cuda.pin_memory, mps.pin_memory) == (False, True, False)
    # an explicit value is kept on every device
    explicit = SpeedConfig(dropout="int16", attention_dtype="float32", malloc="keep")
    for kind in ("cpu", "cuda", "mps"):
        got = resolve(explicit, kind).speed
        assert (got.dropout, got.attention_dtype, got.malloc) == ("int16", "float32", "keep")


def test_switches_that_do_nothing_on_a_device_say_so():
    assert resolve(SpeedConfig(tf32=True), "cpu").notes["tf32"] == "does nothing on cpu: a CUDA setting"
    assert "does nothing on mps" in resolve(SpeedConfig(tf32=True), "mps").line()
    assert resolve(SpeedConfig(tf32=True), "cuda").notes["tf32"] == "float32 matmuls on TF32 tensor cores"
    assert "prototype" in resolve(SpeedConfig(compile=True), "mps").notes["compile"]
    line = resolve(SpeedConfig(), "cuda").line()
    assert line.startswith("speed on cuda: loss=chunked, ") and line.endswith("copied without blocking")
    assert "malloc=system (auto: tensors live in the cuda allocator; host malloc left alone)" in line


@pytest.fixture
def tf32_flag():
    """torch's CUDA TF32 flag (a property of torch's backend module: not monkeypatchable), put back after."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = before


def test_tf32_and_the_deterministic_workspace_are_set_on_cuda_only(monkeypatch, tf32_flag):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    device_settings.apply("cpu", tf32=True, deterministic=True)
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    device_settings.apply("cuda", tf32=True, deterministic=True)
    assert torch.backends.cuda.matmul.allow_tf32 is True
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == CUBLAS_DETERMINISTIC
    device_settings.apply("cuda", tf32=False, deterministic=False)
    assert torch.backends.cuda.matmul.allow_tf32 is False
    assert "trainer.deterministic=true" in exactness("cuda", False) and exactness("cuda", True) is None
    assert exactness("cpu", False) is None


def test_a_module_built_for_cuda_carries_the_resolved_switches(tiny_cfg, monkeypatch):
    cfg = tiny_cfg("model.dropout=0.1")
    run = parse_run_config(cfg)
    datamodule = build_datamodule(run.data, run.model.context_length, run.seed)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # trainer.accelerator=auto now means CUDA
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    _, settings = device_settings.prepare(run)
    assert settings.kind == "cuda"
    module = build_module(run, datamodule.tokenizer, settings.speed)  # built on the CPU, as Lightning builds it
    attention = [m for m in module.modules() if isinstance(m, CausalSelfAttention)]
    dropouts = [m for m in module.modules() if isinstance(m, Dropout)]
    assert attention and dropouts
    assert {(m.core.dropout_masks, m.core.attention_dtype) for m in attention} == {("torch", "compute")}
    assert {m.impl for m in dropouts} == {"torch"}


def test_batches_are_pinned_for_a_run_on_cuda_only(tiny_cfg):
    cfg = tiny_cfg()
    run = parse_run_config(cfg)
    datamodule = build_datamodule(run.data, run.model.context_length, run.seed)
    for device, pinned in (("cuda", True), ("cpu", False), ("mps", False)):
        datamodule.trainer = SimpleNamespace(
            strategy=SimpleNamespace(root_device=torch.device(device)),
            global_rank=0,
            world_size=1,
            global_step=0,
            accumulate_grad_batches=1,
        )
        assert datamodule.train_dataloader().pin_memory is pinned
        assert datamodule.val_dataloader().pin_memory is pinned


@pytest.mark.parametrize("value", ["yes", 1])
def test_tf32_must_be_a_boolean(value):
    with pytest.raises(ValueError, match=r"speed\.tf32=.* must be true or false"):
        SpeedConfig(tf32=value)
