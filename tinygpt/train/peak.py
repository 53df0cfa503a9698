"""The machine's matmul peak, measured by this process: the denominator of MFU, and the test of whether half
precision is a mistake on this machine.

Why measured and never a datasheet number or another machine's figure: the project's own machines differ by 2x
in fp32 and by three orders of magnitude in bf16 (AVX-512 BF16 or not; docs/benchmarks/train.md has the figures),
so a peak written into the config would be wrong on the next machine. The same measurement says when a
half-precision run is a mistake: a CPU without native bf16 (AVX2 only: no AVX512_BF16 or AMX) multiplies bf16
matrices tens of times slower than fp32, while every line of the run looks normal.
"""

from __future__ import annotations

import time

import torch

MAX_SIDE = 2048  # the largest matmul side tried: a 2048^3 matmul is 17 GFLOP, a fraction of a second on a CPU
MIN_SECONDS = 0.02  # grow the side until one matmul takes this long, so a slow dtype (bf16 without hardware
# support) is measured in a fraction of a second, not a minute


DISTURBED = 1.5  # the repeats' fastest over slowest above this: something else was using the cores


def matmul_peak(dtype: torch.dtype, device: torch.device | str = "cpu", repeats: int = 3) -> float:
    """FLOP/s of the best of ``repeats`` square matmuls in ``dtype`` on ``device`` (see ``matmul_rates``)."""
    return max(matmul_rates(dtype, device, repeats))


def matmul_rates(dtype: torch.dtype, device: torch.device | str = "cpu", repeats: int = 5) -> list[float]:
    """FLOP/s of each of ``repeats`` square matmuls in ``dtype`` on ``device``: the side doubles from 256 up to
    MAX_SIDE until one takes MIN_SECONDS, so each is the machine's rate on a matmul large enough to be
    compute-bound, found in bounded time. Their spread says whether the machine was quiet. The operands come
    from a generator of their own: the run's random state (dropout, batches) is the same with or without this
    measurement."""
    device = torch.device(device)
    generator = torch.Generator(device=device).manual_seed(0)
    side = 256
    while True:
        a = torch.randn(side, side, device=device, generator=generator).to(dtype)
        b = torch.randn(side, side, device=device, generator=generator).to(dtype)
        _timed(a, b, device)  # allocation and kernel selection
        times = [_timed(a, b, device) for _ in range(repeats)]
        if min(times) >= MIN_SECONDS or side >= MAX_SIDE:
            return [2 * side**3 / t for t in times]
        side *= 2


def _timed(a: torch.Tensor, b: torch.Tensor, device: torch.device) -> float:
    start = time.perf_counter()
    a @ b
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def slow_half_precision(precision: str, half_peak: float, fp32_peak: float) -> str | None:
    """The warning for a half-precision run whose matmuls are slower than fp32's on this machine, else None: mixed
    precision exists to be faster, so a half peak below the fp32 one means the hardware emulates the dtype."""
    if half_peak >= fp32_peak:
        return None
    return (
        f"trainer.precision={precision}: this machine multiplies {compute_dtype(precision)} matrices at "
        f"{half_peak / 1e9:,.1f} GFLOP/s, {fp32_peak / half_peak:,.0f}x slower than float32 ({fp32_peak / 1e9:,.1f} "
        "GFLOP/s), so it has no native support for it (on a CPU: no AVX512_BF16 or AMX); trainer.precision=32-true "
        "trains faster here, with other rounding"
    )


def compute_dtype(precision: str) -> torch.dtype:
    """The dtype a trainer.precision runs its matmuls in: bf16 or fp16 under mixed or true half, else fp32."""
    if precision.startswith("bf16"):
        return torch.bfloat16
    if precision.startswith("16"):
        return torch.float16
    return torch.float32
