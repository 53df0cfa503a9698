"""glibc's malloc told to keep freed memory for reuse (`speed.malloc`), so large tensors stop costing page faults.

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
import sys
from collections.abc import Callable

from tinygpt.common.errors import ConfigError
from tinygpt.model.speed import MALLOC_IMPLS

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
    """Set this process's malloc thresholds for `speed.malloc` (see the module docstring); returns keep or system.

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
