"""How many jobs share one accelerator under ``sweep.jobs_per_device=auto``: decided once per multirun, stated.

One of 003's 1.8M-parameter runs fills a few percent of a modern GPU, so a sweep packs k jobs on each device
(tinygpt/launch/devices.py's slots). With ``auto``, k is the smaller of two bounds:
- memory: three quarters of the device's free memory (the least free of the pool's devices, measured when the
  multirun starts), divided by one job's estimated footprint (tinygpt/launch/footprint.py). The quarter left over
  is for what the estimate does not count: the caching allocator's rounding and fragmentation, and the estimate's
  own error, which was measured on a CPU only; a CUDA run records its allocator's peak in run.json, which is
  how to check the estimate on a GPU;
- CPU cores: every packed job drives its device from a Python process of its own, and a job starved of a core
  leaves its GPU idle, so at most the cores divided by the devices.
The estimate is made for the config the multirun composes before its sweep values (the overrides every job
shares): a sweep over model sizes should set the number itself, or be estimated at its largest model.

The decision is made in the launching process by the placement callback's ``on_multirun_start``, before Hydra
builds the launcher, and written to ``<sweep dir>/jobs_per_device.json``; the launcher's ``n_jobs`` resolver and
every job's lease read it from there, so all of them use one k however the free memory moves once jobs start.
The CUDA probe runs in a child process, so the launcher itself never holds a CUDA context (about 0.5 GiB) for
the length of the sweep.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
from omegaconf import DictConfig

from tinygpt.common.errors import ConfigError
from tinygpt.common.files import write_json_atomic
from tinygpt.launch.devices import DevicePool, cpu_cores
from tinygpt.launch.footprint import GIB, Footprint, estimate
from tinygpt.model import GPTConfig, config_from
from tinygpt.model.kernels import resolved as dropout_masks_on

AUTO = "auto"
PLAN = "jobs_per_device.json"
USABLE = 0.75  # of the free memory: the rest is left to the allocator's rounding and fragmentation
# a character tokenizer's vocabulary is fitted on the corpus, which the launcher does not read: no byte-level
# corpus in the spec has more distinct characters than this, and a char model's head is small either way
CHAR_VOCAB_BOUND = 256
TOKENIZER_VOCAB = {"bytes": 256, "gpt2": 50257}


def free_memory(kind: str, index: int) -> int:
    """Free bytes on device ``index`` of ``kind`` ("cuda" or "mps")."""
    if kind == "cuda":
        probe = f"import torch; print(torch.cuda.mem_get_info({int(index)})[0])"
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(
                f"sweep.jobs_per_device=auto: could not read CUDA device {index}'s free memory: "
                f"{done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'no output'}"
            )
        return int(done.stdout.strip())
    if kind == "mps":
        import torch

        return int(torch.mps.recommended_max_memory() - torch.mps.driver_allocated_memory())
    raise ConfigError(f"sweep.jobs_per_device=auto: a {kind} pool has no accelerator memory to divide")


def vocabulary(cfg: DictConfig) -> tuple[int, str]:
    """The vocabulary a job will have, without reading its corpus, and where the figure comes from."""
    if cfg.model.get("vocab_size"):
        return int(cfg.model.vocab_size), "model.vocab_size"
    tokenizer = cfg.data.tokenizer
    if tokenizer.name in TOKENIZER_VOCAB:
        return TOKENIZER_VOCAB[tokenizer.name], f"data.tokenizer={tokenizer.name}"
    if tokenizer.get("vocab_size"):
        return int(tokenizer.vocab_size), "data.tokenizer.vocab_size"
    return CHAR_VOCAB_BOUND, f"at most {CHAR_VOCAB_BOUND} characters assumed"


def job_footprint(cfg: DictConfig, kind: str) -> tuple[Footprint, str]:
    """One job's estimated footprint on a device of ``kind``, and a summary of the shape it was estimated for."""
    vocab, source = vocabulary(cfg)
    config = replace(config_from(cfg.model), vocab_size=vocab)
    if not isinstance(config, GPTConfig):
        raise ConfigError(
            f"sweep.jobs_per_device=auto estimates GPT models; model.family={config.family}: set a number"
        )
    precision = str(cfg.trainer.precision)
    mixed = (precision == "auto" and kind != "cpu") or not (precision == "auto" or precision.startswith("32"))
    speed = cfg.speed
    # speed.dropout's own auto rule; a simulated device (tests) stands for an accelerator
    dropout_masks = dropout_masks_on(speed.dropout, torch.device("meta" if kind == "simulated" else kind))
    written_out = config.dropout > 0 and (speed.attention == "explicit" or dropout_masks == "int16")
    footprint = estimate(
        config,
        int(cfg.data.batch_size),
        "bf16-mixed" if mixed else "32-true",
        kind,
        loss=speed.loss,
        loss_chunk=speed.loss_chunk,
        written_out_attention=written_out,
    )
    shape = (
        f"{config.n_layers} layers x d_model {config.d_model}, batch {cfg.data.batch_size} x context "
        f"{config.context_length}, vocabulary {vocab} ({source}), {'mixed' if mixed else '32-bit'} precision"
    )
    return footprint, shape


def decide(cfg: DictConfig, pool: DevicePool) -> dict:
    """The plan for ``pool`` (its devices; one slot each): k, and the line that says why."""
    if pool.kind == "cpu":
        return {"jobs_per_device": 1, "why": "sweep.jobs_per_device=auto: 1 (a CPU pool's slots are sweep.cpu_jobs)"}
    footprint, shape = job_footprint(cfg, pool.kind)
    free = min(free_memory(pool.kind, index) for index in range(len(pool.devices)))
    by_memory = int(free * USABLE // footprint.total)
    cores = cpu_cores()
    by_cores = max(1, cores // len(pool.devices))
    k = max(1, min(by_memory, by_cores))
    why = (
        f"sweep.jobs_per_device=auto: {k} job(s) per {pool.kind} device, the smaller of memory "
        f"({free / GIB:.1f} GiB free x {USABLE} / {footprint.total / GIB:.2f} GiB per job = {by_memory}) and "
        f"CPU cores ({cores} / {len(pool.devices)} device(s) = {by_cores}); one job estimated at "
        f"{footprint.describe()} for {shape}"
    )
    if by_memory < 1:
        why += "; one job's estimate exceeds the free memory: running one at a time"
    return {
        "jobs_per_device": k,
        "why": why,
        "free_bytes": free,
        "footprint_bytes": footprint.total,
        "by_memory": by_memory,
        "by_cores": by_cores,
        "decided_at": time.time(),
    }


def write_plan(sweep_dir: str | Path, plan: dict) -> Path:
    path = Path(sweep_dir) / PLAN
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, plan)
    return path


def jobs_per_device(value: int | str, sweep_dir: str | Path | None) -> int:
    """``sweep.jobs_per_device`` as a number: itself, or for ``auto`` the multirun's plan in ``sweep_dir``."""
    if str(value) != AUTO:
        return int(value)
    path = Path(str(sweep_dir)) / PLAN if sweep_dir else None
    if path is None or not path.is_file():
        raise ConfigError(
            f"sweep.jobs_per_device=auto: no plan at {path} (it is decided when a multirun starts, by the "
            "placement callback: use it with -m and the placement launcher, or set a number)"
        )
    return int(json.loads(path.read_text())["jobs_per_device"])
