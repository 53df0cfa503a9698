"""What a run's speed switches and determinism mean on the device it trains on: resolved once, applied, stated once.

The `speed.*` switches were measured on CPUs (tinygpt/model/speed.py); a run on a CUDA GPU or Apple's GPU must
not inherit a CPU choice by accident, nor silently accept a switch that has no effect there. So before the module
is built, every switch whose value depends on the device is resolved here for the device the run trains on
(tinygpt/launch/precision.py's kind: cuda, mps or cpu), the resolved values are what the model is built with,
and one console line and run.json's session provenance (``speed``) say what each switch does there:

- ``dropout=auto``: int16 masks on a CPU (measured faster there); torch's dropout on CUDA and MPS, where it is
  one fused kernel (SDPA's own for attention dropout) that int16's extra passes are not expected to beat.
- ``attention_dtype=auto``: on a CPU fp32 for SDPA's core and autocast's dtype for the written-out softmax (the
  faster of each there); on CUDA and MPS autocast's dtype, where half-precision attention is what the kernels
  (flash, memory-efficient) are built for.
- ``malloc=auto``: glibc's thresholds raised on a CPU with glibc; on a GPU the tensors live in the device's
  caching allocator, so host malloc is left as it is (``system``); ``keep`` stays possible (host memory only).
- ``tf32``: CUDA only. true lets float32 matmuls run on TF32 tensor cores (10 mantissa bits instead of 23;
  ``torch.backends.cuda.matmul.allow_tf32``), false keeps IEEE float32 (PyTorch's default; the model has no
  convolutions, whose cuDNN flag is left as it is).
  It matters for ``trainer.precision=32-true`` and for the float32 work left outside autocast; on a CPU or MPS
  it does nothing, and the line says so.
- ``compile``: on MPS torch.compile's backend is a prototype; allowed, and stated.
- ``optimizer=fused``: torch's fused AdamW runs on the CPU, CUDA and MPS alike.
- batches: on CUDA the DataModule pins host memory (tinygpt/data/datamodule.py) and Lightning copies pinned
  batches to the device without blocking; on the CPU and MPS there is nothing to pin.

Determinism: Lightning's ``trainer.deterministic=true`` turns on ``torch.use_deterministic_algorithms``; cuBLAS
also needs ``CUBLAS_WORKSPACE_CONFIG`` set before its first handle is made, which Lightning sets only when the
Trainer is built, after this process may have run a matmul (a placed sweep worker runs several jobs). So a
deterministic CUDA run sets it here, first. Bit-exact resume on CUDA needs it: without it, atomics in backward
passes (embedding gradients, some attention kernels) add in a varying order. On the CPU every kernel tinygpt
uses is deterministic already (resume is bit-exact with or without the switch: tests/test_train_reliability.py).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace

import torch

from tinygpt.model.kernels import resolved as dropout_masks_on
from tinygpt.model.speed import SpeedConfig
from tinygpt.train.malloc import resolve_malloc

CUBLAS_DETERMINISTIC = ":4096:8"  # NVIDIA's documented setting for reproducible cuBLAS results


@dataclass(frozen=True)
class DeviceSettings:
    kind: str  # "cuda", "mps" or "cpu"
    speed: SpeedConfig  # the switches the model is built with, auto resolved where the device decides it
    notes: dict[str, str]  # switch -> what it does on this device, where that needs saying
    pin_memory: bool
    deterministic: bool

    def line(self) -> str:
        """One console line: every switch's value on this device, with its note (the MFU peak has its own line)."""
        parts = []
        for name, value in asdict(self.speed).items():
            if name == "peak_flops":
                continue
            shown = str(value).lower() if isinstance(value, bool) or value is None else str(value)
            note = self.notes.get(name)
            parts.append(f"{name}={shown}" + (f" ({note})" if note else ""))
        if self.pin_memory:
            parts.append("batches: pinned host memory, copied without blocking")
        return f"speed on {self.kind}: " + ", ".join(parts)

    def record(self) -> dict:
        """For run.json's session provenance."""
        return {"values": asdict(self.speed), "notes": dict(self.notes), "pin_memory": self.pin_memory}


def resolve(speed: SpeedConfig, kind: str, deterministic: bool = False) -> DeviceSettings:
    """``speed`` for a run on ``kind`` (see the module docstring); raises ValueError naming the switch where a
    value cannot work there (``malloc=keep`` without glibc)."""
    values, notes = {}, {}
    if speed.dropout == "auto":
        values["dropout"] = dropout_masks_on("auto", torch.device(kind))  # the model's own auto rule
        notes["dropout"] = "auto: int16 masks on a CPU" if kind == "cpu" else f"auto: torch's fused kernel on {kind}"
    if speed.attention_dtype == "auto":
        if kind == "cpu":
            notes["attention_dtype"] = "auto: float32 for SDPA's core, autocast's dtype for the written-out softmax"
        else:
            values["attention_dtype"] = "compute"
            notes["attention_dtype"] = f"auto: autocast's dtype on {kind}"
    if kind == "cpu":
        malloc = resolve_malloc(speed.malloc)
        if speed.malloc == "auto":
            notes["malloc"] = "auto: glibc keeps freed memory" if malloc == "keep" else "auto: not glibc, left alone"
        values["malloc"] = malloc
    elif speed.malloc == "auto":
        values["malloc"] = "system"
        notes["malloc"] = f"auto: tensors live in the {kind} allocator; host malloc left alone"
    else:
        values["malloc"] = resolve_malloc(speed.malloc)
        notes["malloc"] = "host memory only"
    if kind != "cuda":
        notes["tf32"] = f"does nothing on {kind}: a CUDA setting"
    else:
        notes["tf32"] = "float32 matmuls on TF32 tensor cores" if speed.tf32 else "float32 matmuls in IEEE float32"
    if speed.compile and kind == "mps":
        notes["compile"] = "torch.compile's MPS backend is a prototype"
    return DeviceSettings(kind, replace(speed, **values), notes, pin_memory=kind == "cuda", deterministic=deterministic)


def apply(settings: DeviceSettings) -> None:
    """Set what belongs to the process: TF32 on CUDA, and cuBLAS's workspace for a deterministic CUDA run (before
    any cuBLAS handle exists, if this process has made none yet; see the module docstring)."""
    if settings.kind != "cuda":
        return
    if settings.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_DETERMINISTIC)
    # the CUDA-only flag: torch.set_float32_matmul_precision("high") would also let oneDNN's CPU matmuls use TF32
    torch.backends.cuda.matmul.allow_tf32 = settings.speed.tf32


def exactness(kind: str, deterministic: bool) -> str | None:
    """What resume promises on this device, for the run's first lines; None where there is nothing to add."""
    if kind == "cuda" and not deterministic:
        return "resume on CUDA is bit-exact only with trainer.deterministic=true (now false)"
    if kind == "mps":
        return "resume on MPS continues the same run; whether bit-exactly is untested (no Mac in tinygpt's CI)"
    return None
