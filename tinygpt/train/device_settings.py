"""The device a run trains on, its precision, and what its speed switches and determinism mean there: resolved
once, applied, stated once.

``prepare(run)`` is the one call: the device and precision first, then every switch for that device.

The device: ``trainer.accelerator=auto`` is Lightning's own choice, CUDA, then Apple's GPU (MPS), then the CPU,
the order the spec's code uses ("The code picks CUDA, then Apple's GPU, then the CPU"). This module names that
choice before training, so the first lines of a run say where it trains.

The precision: ``trainer.precision=auto`` (the default) is resolved here, before anything is written, and the
resolved value is what the run records and pre-registers (so a run written before ``auto`` existed, at 32-true,
resumes unchanged on a CPU):
- CUDA: ``bf16-mixed`` where the device multiplies bf16 natively (``torch.cuda.is_bf16_supported()``: Ampere
  and later), else ``16-mixed``, which Lightning runs with a loss scaler;
- MPS: ``16-mixed`` (autocast in float16, which every MPS device supports; bf16 needs a recent macOS);
- the CPU: ``32-true``. Mixed precision on a CPU pays only with native bf16 (AVX512_BF16 or AMX), and without it
  bf16 matmuls run far slower than fp32's (tinygpt/train/peak.py warns when a run asks for it anyway); a user
  who has such a CPU sets ``trainer.precision=bf16-mixed``.
An explicit precision is used as given.

The `speed.*` switches were measured on CPUs (tinygpt/model/speed.py); a run on a CUDA GPU or Apple's GPU must
not inherit a CPU choice by accident, nor silently accept a switch that has no effect there. So before the module
is built, every switch whose value depends on the device is resolved here for the device the run trains on (its
kind: cuda, mps or cpu), the resolved values are what the model is built with, and one console line and run.json's
session provenance (``speed``) say what each switch does there:

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

The allocator (``speed.malloc=keep``): glibc's malloc told to keep freed memory for reuse, so large tensors stop
costing page faults.
Why: torch's CPU tensors come from malloc. glibc serves a request above its mmap threshold (128 KiB at the
start, rising with the blocks freed to at most 32 MiB) with a fresh mmap and unmaps it on free, and it returns
the top of its heap to the kernel whenever more than the trim threshold is free there. A training step allocates
the same large tensors every step (a 4,096 × 2,048 fp32 block of logits is exactly 32 MiB; 000's 50,257 × 256
gradients are 49 MiB), so every page of each of them is faulted in again, and zeroed by the kernel, every step.
On a small VM that can cost more than the op that fills the tensor. Raising both thresholds to 1 GiB (`keep`)
keeps freed blocks in the heap, where the next step's tensors reuse them: 000's model trains faster in bf16, the
other benchmark shapes within noise (the figures: docs/benchmarks/train.md).
PyTorch's CPU tuning guide gets the same effect by preloading jemalloc or tcmalloc, which a
`python scripts/train.py` cannot do for itself once it has started; mallopt(3) is glibc's own switch for it
and takes effect for every later allocation.

It changes where tensors live, never what is computed: the losses and weights are bit-identical (tested). The
cost: the process's resident memory no longer shrinks after a peak until it exits. The setting belongs to the
process, so the last one applied holds for every run in it; `system` after `keep` sets glibc's starting
thresholds back (128 KiB), but glibc's rise from there does not come back, so compare the two in separate
processes (scripts/bench_train.py refuses `--ab speed.malloc=...`). On a GPU it only concerns host memory
(batches, checkpoints); not measured there.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

import torch

from tinygpt.common.errors import ConfigError
from tinygpt.model.kernels import resolved as dropout_masks_on
from tinygpt.model.speed import MALLOC_IMPLS, SpeedConfig

if TYPE_CHECKING:
    from tinygpt.train.schema import RunConfig

AUTO = "auto"
CUBLAS_DETERMINISTIC = ":4096:8"  # NVIDIA's documented setting for reproducible cuBLAS results


def prepare(run: RunConfig) -> tuple[RunConfig, DeviceSettings]:
    """The one call a run makes: ``run`` with ``trainer.precision=auto`` replaced by its device's precision (what
    the run records and pre-registers), and the speed switches resolved for that device, whose process flags are
    set now, before any matmul of the run (see the module docstring). Raises ConfigError naming a switch that
    cannot work there."""
    device = choose(run.trainer["accelerator"], run.trainer["precision"])
    deterministic = bool(run.trainer.get("deterministic"))
    apply(device.kind, run.speed.tf32, deterministic)
    settings = resolve(run.speed, device.kind, deterministic, device.why)
    if str(run.trainer["precision"]) != device.precision:
        run = replace(run, trainer={**run.trainer, "precision": device.precision})
    return run, settings


@dataclass(frozen=True)
class DeviceChoice:
    kind: str  # "cuda", "mps" or "cpu"
    precision: str  # what the Trainer gets
    why: str  # one line for the console


def choose(accelerator: str, precision: str) -> DeviceChoice:
    """The device kind and precision a run trains with; a precision Lightning does not know, or an accelerator this
    machine does not have, refused in one line naming the setting and what is allowed (before anything is
    written: the preflight and the run both start here)."""
    allowed = lightning_precisions()
    if str(precision) != AUTO and str(precision) not in allowed:
        raise ConfigError(
            f"trainer.precision={precision} is not allowed: must be auto or one of Lightning's: " + ", ".join(allowed)
        )
    kind, device_why = device_kind(accelerator)
    if str(precision) == AUTO:
        resolved, precision_why = auto_precision(kind)
        precision_why = f"trainer.precision=auto: {precision_why}"
    else:
        resolved, precision_why = str(precision), f"trainer.precision={precision}"
    return DeviceChoice(kind, resolved, f"device: {kind} ({device_why}); precision: {resolved} ({precision_why})")


@functools.cache
def lightning_precisions() -> list[str]:
    """The values Lightning's Trainer takes for ``precision``, read from its own signature's type (a Literal)."""
    import typing

    from lightning import Trainer

    def literals(annotation) -> list:
        out = []
        for arg in typing.get_args(annotation):
            out += list(typing.get_args(arg)) if typing.get_origin(arg) is typing.Literal else literals(arg)
        return out

    return list(dict.fromkeys(str(v) for v in literals(typing.get_type_hints(Trainer.__init__)["precision"])))


def device_kind(accelerator: str) -> tuple[str, str]:
    """(the device kind a run with this ``trainer.accelerator`` trains on, why). ``gpu`` is Lightning's "CUDA or
    Apple's GPU", ``auto`` its "CUDA, then Apple's GPU, then the CPU"."""
    accelerator = str(accelerator)
    setting = f"trainer.accelerator={accelerator}"
    cuda, mps = torch.cuda.is_available(), torch.backends.mps.is_available()
    here = ", ".join(["auto", *(["cuda", "gpu"] if cuda else []), *(["mps", "gpu"] if mps and not cuda else []), "cpu"])
    missing = {"cuda": not cuda, "mps": not mps, "gpu": not (cuda or mps)}
    if missing.get(accelerator):
        what = {"cuda": "no CUDA device", "mps": "no Apple GPU (MPS)", "gpu": "no CUDA or Apple GPU"}[accelerator]
        raise ConfigError(f"{setting} is not available: this machine has {what}; it allows {here}")
    searched = accelerator in (AUTO, "gpu")
    if accelerator == "cuda" or (searched and torch.cuda.is_available()):
        return "cuda", setting + (": CUDA is available" if searched else "")
    if accelerator in ("mps", "gpu") or (searched and torch.backends.mps.is_available()):
        return "mps", setting + (": no CUDA, Apple's GPU is available" if searched else "")
    return "cpu", setting + (": no CUDA or MPS device" if searched else "")


def auto_precision(kind: str) -> tuple[str, str]:
    """(the precision ``auto`` means on this device kind, why)."""
    if kind == "cuda":
        if torch.cuda.is_bf16_supported():
            return "bf16-mixed", "this CUDA device has native bf16"
        return "16-mixed", "this CUDA device has no native bf16: fp16 autocast with loss scaling"
    if kind == "mps":
        return "16-mixed", "Apple's GPU: fp16 autocast"
    return (
        "32-true",
        "on a CPU mixed precision pays only with native bf16; set trainer.precision=bf16-mixed if yours has it",
    )


@dataclass(frozen=True)
class DeviceSettings:
    kind: str  # "cuda", "mps" or "cpu"
    speed: SpeedConfig  # the switches the model is built with, auto resolved where the device decides it
    notes: dict[str, str]  # switch -> what it does on this device, where that needs saying
    pin_memory: bool
    deterministic: bool
    why: str = ""  # the device and precision chosen, and why (choose)

    @property
    def lines(self) -> list[str]:
        """What a run says of its device before training: where, in which precision, each switch, what resume
        promises there."""
        promise = exactness(self.kind, self.deterministic)
        return [line for line in (self.why, self.line(), promise) if line]

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


def resolve(speed: SpeedConfig, kind: str, deterministic: bool = False, why: str = "") -> DeviceSettings:
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
    return DeviceSettings(
        kind, replace(speed, **values), notes, pin_memory=kind == "cuda", deterministic=deterministic, why=why
    )


def apply(kind: str, tf32: bool, deterministic: bool) -> None:
    """Set what belongs to the process on a device of this ``kind``: TF32 on CUDA (``speed.tf32``), and cuBLAS's
    workspace for a deterministic CUDA run (before any cuBLAS handle exists, if this process has made none yet;
    see the module docstring)."""
    if kind != "cuda":
        return
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_DETERMINISTIC)
    # the CUDA-only flag: torch.set_float32_matmul_precision("high") would also let oneDNN's CPU matmuls use TF32
    torch.backends.cuda.matmul.allow_tf32 = tf32


def exactness(kind: str, deterministic: bool) -> str | None:
    """What resume promises on this device, for the run's first lines; None where there is nothing to add."""
    if kind == "cuda" and not deterministic:
        return "resume on CUDA is bit-exact only with trainer.deterministic=true (now false)"
    if kind == "mps":
        return "resume on MPS continues the same run; whether bit-exactly is untested (no Mac in tinygpt's CI)"
    return None


# -- the allocator (speed.malloc) -------------------------------------------------------------------------
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt(3)'s parameter numbers (glibc's malloc.h)
KEEP_BYTES = 1 << 30  # above any tensor a small model allocates: nothing is unmapped or trimmed
SYSTEM_BYTES = 128 * 1024  # glibc's starting value of both thresholds

_applied: str | None = None  # what this process last set ("keep"/"system"), None: glibc untouched


def glibc_mallopt() -> Callable[[int, int], int] | None:
    """glibc's mallopt, or None where the C library is not glibc (macOS, Windows, musl's no-op stub)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)  # the C library this process already runs on
    except OSError:
        return None
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return None
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt


def resolve_malloc(mode: str) -> str:
    """ "keep" or "system" for `speed.malloc`: auto is keep where glibc is the C library, system elsewhere."""
    if mode not in MALLOC_IMPLS:
        raise ConfigError(f"speed.malloc={mode!r} is not allowed: must be one of {', '.join(MALLOC_IMPLS)}")
    has_glibc = glibc_mallopt() is not None
    if mode == "keep" and not has_glibc:
        raise ConfigError(
            f"speed.malloc=keep is not allowed on {sys.platform}: it needs glibc's mallopt (Linux); use auto or system"
        )
    if mode == "auto":
        return "keep" if has_glibc else "system"
    return mode


def apply_malloc(mode: str) -> str:
    """Set this process's malloc thresholds for `speed.malloc` (the module docstring's allocator); returns keep or
    system.

    Idempotent. `system` leaves glibc untouched unless this process set `keep` before, and then restores the
    starting thresholds.
    """
    global _applied
    resolved = resolve_malloc(mode)
    if resolved == _applied or (resolved == "system" and _applied is None):
        return resolved
    value = KEEP_BYTES if resolved == "keep" else SYSTEM_BYTES
    mallopt = glibc_mallopt()
    for parameter in (M_MMAP_THRESHOLD, M_TRIM_THRESHOLD):
        if mallopt(parameter, value) != 1:
            raise RuntimeError(f"speed.malloc={mode}: glibc's mallopt({parameter}, {value}) refused the value")
    _applied = resolved
    return resolved
