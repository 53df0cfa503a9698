"""Which device a single run trains on, and in which precision, when the config says ``auto``; and why.

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
  bf16 matmuls run far slower than fp32's (tinygpt/train/speed.py warns when a run asks for it anyway); a user
  who has such a CPU sets ``trainer.precision=bf16-mixed``.
An explicit precision is used as given.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

AUTO = "auto"


@dataclass(frozen=True)
class DeviceChoice:
    kind: str  # "cuda", "mps" or "cpu"
    precision: str  # what the Trainer gets
    why: str  # one line for the console


def device_kind(accelerator: str) -> tuple[str, str]:
    """(the device kind a run with this ``trainer.accelerator`` trains on, why). ``gpu`` is Lightning's "CUDA or
    Apple's GPU", ``auto`` its "CUDA, then Apple's GPU, then the CPU"."""
    accelerator = str(accelerator)
    setting = f"trainer.accelerator={accelerator}"
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


def choose(accelerator: str, precision: str) -> DeviceChoice:
    kind, device_why = device_kind(accelerator)
    if str(precision) == AUTO:
        resolved, precision_why = auto_precision(kind)
        precision_why = f"trainer.precision=auto: {precision_why}"
    else:
        resolved, precision_why = str(precision), f"trainer.precision={precision}"
    return DeviceChoice(kind, resolved, f"device: {kind} ({device_why}); precision: {resolved} ({precision_why})")
