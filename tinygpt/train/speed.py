"""Tokens per second and model FLOPs utilization (MFU), logged every step.

FLOPs per token (the model's own ``flops_per_token()``, read when training starts) follow 003 and PaLM: 6N for the
parameters, plus 12·L·T·D for attention's own scores and weighted sums. MFU divides the achieved rate by a
*measured* peak of the machine, never a datasheet number or another machine's figure:
``speed.peak_flops.<precision>`` when the user has measured it, else a large matmul in the run's compute dtype timed
by this process at the start of training (about a second). The project's own 2-core machines differ by 2x in fp32
(205 vs 107 GFLOP/s) and by 3,000x in bf16 (AVX-512 BF16 or not), so a peak written into the config would be wrong
on the next machine. Lightning's ThroughputMonitor only knows GPU datasheet peaks and logs outside ``self.log`` (so
not in the progress bar), hence this small callback.

The same measurement says when a half-precision run is a mistake on this machine: a CPU without native bf16
(AVX2 only: no AVX512_BF16 or AMX) multiplies bf16 matrices tens of times slower than fp32, and every line of the
run looks normal (docs/benchmarks/train.md has the machines' figures). So a half-precision run whose peak is
measured also times an fp32 matmul (a fraction of a second, only on that path) and warns once, with both figures,
where its own is lower.
"""

from __future__ import annotations

import time
from collections import deque

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_warn

from tinygpt.common.say import say
from tinygpt.train.record import run_record

MAX_SIDE = 2048  # the largest matmul side tried: a 2048^3 fp32 matmul is 17 GFLOP, about 0.1 s on 2 CPU cores
MIN_SECONDS = 0.02  # grow the side until one matmul takes this long (about 0.15 s per run in all), so a slow
# dtype (bf16 without hardware support: 0.28 GFLOP/s) is measured in a fraction of a second, not a minute


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


class SpeedMonitor(L.Callback):
    def __init__(self, peak_flops: float | None, window: int = 20):
        """peak_flops: ``speed.peak_flops``, None to measure it when training starts, in the Trainer's precision;
        the peak that MFU divides by goes into the run record's provenance, when the run has a record."""
        self.flops_per_token = 0  # the model's, when training starts
        self.peak_flops = peak_flops
        self.precision = "32-true"  # the Trainer's, when training starts
        self.window = window
        self._marks: deque[tuple[float, int]] = deque(maxlen=window + 1)
        self.tokens_per_sec = float("nan")

    def on_train_start(self, trainer, pl_module):
        self.flops_per_token = pl_module.model.flops_per_token()
        self.precision = str(trainer.precision)
        source = "speed.peak_flops" if self.peak_flops is not None else "measured"
        if self.peak_flops is None:
            dtype = compute_dtype(self.precision)
            rates = matmul_rates(dtype, pl_module.device)
            self.peak_flops = max(rates)
            if trainer.is_global_zero:
                say(
                    f"MFU against this machine's matmul peak, measured now: "
                    f"{self.peak_flops / 1e9:,.1f} GFLOP/s ({self.precision}; set speed.peak_flops "
                    "to fix it)"
                )
                if max(rates) > DISTURBED * min(rates):
                    say(
                        f"the peak's {len(rates)} matmuls ranged from {min(rates) / 1e9:,.1f} to "
                        f"{max(rates) / 1e9:,.1f} GFLOP/s: something else is using the cores, so this peak and the "
                        "MFU against it mean little; measure on a quiet machine and set speed.peak_flops"
                    )
            if dtype != torch.float32:
                fp32_peak = max(matmul_rates(torch.float32, pl_module.device))
                warning = slow_half_precision(self.precision, self.peak_flops, fp32_peak)
                if warning:
                    rank_zero_warn(warning)
        record = run_record(trainer)
        if record is not None:
            record.note_peak(self.peak_flops, source)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        tokens = batch[0].numel() * trainer.world_size
        self._marks.append((time.perf_counter(), tokens))
        if len(self._marks) < 2:
            return
        elapsed = self._marks[-1][0] - self._marks[0][0]
        counted = sum(n for _, n in list(self._marks)[1:])
        self.tokens_per_sec = counted / elapsed
        pl_module.log("train/tokens_per_sec", self.tokens_per_sec, prog_bar=True)
        if self.peak_flops:
            pl_module.log("train/mfu", self.tokens_per_sec * self.flops_per_token / self.peak_flops)

    def on_validation_start(self, trainer, pl_module):
        # validation time is not training throughput
        self._marks.clear()
