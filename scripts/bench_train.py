"""Training-step throughput of the `blog` experiment: Lightning (tinygpt's GPTModule and Trainer) against a
plain PyTorch loop over the same model, batches and optimizer, in the same process, fp32 and bf16-mixed.

    python scripts/bench_train.py [--steps 20] [--warmup 3] [--out docs/benchmarks/train.md]

Writes a Markdown table (tokens/s, MFU against the measured peak of this machine, and Lightning's
overhead) to --out and prints it. Speed is measured here, never in tests.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import lightning as L
import torch
import torch.nn.functional as F
from hydra import compose, initialize_config_dir

import tinygpt.train  # noqa: F401
from tinygpt.data import TextDataModule
from tinygpt.train.module import GPTModule
from tinygpt.train.optim import OptimConfig, build_optimizer
from tinygpt.train.run import model_config
from tinygpt.train.speed import flops_per_token

CONF = Path(__file__).resolve().parents[1] / "conf"


class StepTimes(L.Callback):
    def __init__(self):
        self.ends: list[float] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.ends.append(time.perf_counter())


def plain_loop(module: GPTModule, batches, steps: int, warmup: int, precision: str) -> float:
    """Seconds per step of a hand-written loop doing what the Trainer does: forward, loss, backward,
    clip at 1.0, AdamW, schedule."""
    model = module.model.train()
    optimizer, schedule = build_optimizer(model, module.optim_config, steps + warmup)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16-mixed")
    ends = []
    for step in range(steps + warmup):
        x, y = batches.batch(step)
        with autocast:
            logits = model(x).logits
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        ends.append(time.perf_counter())
    return (ends[-1] - ends[warmup - 1]) / steps


def lightning_loop(module: GPTModule, datamodule, steps: int, warmup: int, precision: str) -> float:
    timer = StepTimes()
    trainer = L.Trainer(max_steps=steps + warmup, precision=precision, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                        max_epochs=-1, callbacks=[timer], gradient_clip_val=1.0, accelerator="cpu", devices=1)
    trainer.fit(module, datamodule=datamodule)
    return (timer.ends[-1] - timer.ends[warmup - 1]) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--out", default="docs/benchmarks/train.md")
    args = parser.parse_args()

    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=["experiment=blog"])
    datamodule = TextDataModule(cfg.data, context_length=cfg.model.context_length, seed=0)
    datamodule.setup("fit")
    config = model_config(cfg, datamodule.vocab_size)
    optim = vars(OptimConfig.from_omegaconf(cfg.optim))
    tokens = cfg.data.batch_size * config.context_length

    rows = []
    for precision in ("32-true", "bf16-mixed"):
        timings = {}
        for name in ("plain", "lightning", "plain", "lightning"):  # interleaved, best of two
            torch.manual_seed(0)
            module = GPTModule(vars(config), optim, args.steps + args.warmup)
            if name == "plain":
                seconds = plain_loop(module, datamodule.train_batches, args.steps, args.warmup, precision)
            else:
                seconds = lightning_loop(module, datamodule, args.steps, args.warmup, precision)
            timings[name] = min(timings.get(name, float("inf")), seconds)
        n_params = module.model.num_parameters()
        flops = flops_per_token(n_params, config.n_layers, config.context_length, config.d_model)
        peak = cfg.speed.peak_flops[precision]
        for name in ("plain", "lightning"):
            rate = tokens / timings[name]
            rows.append((precision, name, timings[name] * 1e3, rate, rate * flops / peak))
        rows.append((precision, "overhead", (timings["lightning"] / timings["plain"] - 1) * 100, None, None))

    lines = [
        "# Training-step throughput: the `blog` experiment (003's model, 32 x 256 characters of PEPs)",
        "",
        f"`python scripts/bench_train.py --steps {args.steps} --warmup {args.warmup}` on {platform.machine()}, "
        f"{torch.get_num_threads()} torch threads, torch {torch.__version__}; best of two interleaved runs each. "
        f"MFU = tokens/s x (6N + 12·L·T·D) / measured peak (`speed.peak_flops`: "
        f"{cfg.speed.peak_flops['32-true'] / 1e9:.0f} GFLOP/s fp32, "
        f"{cfg.speed.peak_flops['bf16-mixed'] / 1e9:.0f} GFLOP/s bf16 on this machine).",
        "",
        "| precision | loop | ms / step | tokens/s | MFU |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for precision, name, ms, rate, mfu in rows:
        if rate is None:
            lines.append(f"| {precision} | Lightning overhead | {ms:+.1f}% | | |")
        else:
            lines.append(f"| {precision} | {name} | {ms:.0f} | {rate:,.0f} | {mfu:.1%} |")
    text = "\n".join(lines) + "\n"
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    raise SystemExit(main())
