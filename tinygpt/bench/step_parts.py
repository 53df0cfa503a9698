"""Where a training step's time goes (003's timing table): batch assembly, forward (with the loss), backward,
optimizer step (with clipping), and MFU, for each tokenizer asked for (the console command tinygpt-step-parts).

    tinygpt-step-parts --tokenizers char,bpe          # 003's table: experiment=blog, characters and BPE
    tinygpt-step-parts experiment=since_gpt2          # any config, with its own tokenizer
    tinygpt-step-parts [--steps 20] [--warmup 5] [--out step_parts.md] [overrides ...]
    tinygpt-step-parts --steps 2 --warmup 1 experiment=smoke     # a quick check of the script

Each part is timed on its own clock around the same calls the training loop makes (on a GPU, after a
synchronize), averaged over --steps after --warmup: the loss is GPTModule.compute_loss, so every speed.*
switch applies as in training, under bf16 autocast when trainer.precision is bf16-mixed; the optimizer is
OptimConfig.build with speed.optimizer's implementation, and clipping happens only where optim.grad_clip is
above 0, as the Trainer does it. MFU = tokens/s x (6N + 12·L·T·D) / the machine's peak: speed.peak_flops if
set, else a matmul timed in this process in the run's compute dtype (tinygpt/train/peak.py). Speed is
measured here, never in tests; figures taken on a loaded machine are not figures.
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import torch

from tinygpt.bench import train as bench_train
from tinygpt.cli.entry import entry
from tinygpt.data import build_datamodule
from tinygpt.model.speed import optimizer_flags
from tinygpt.train.device_settings import choose
from tinygpt.train.module import build_module
from tinygpt.train.peak import compute_dtype, matmul_peak

PARTS = ("batch", "forward", "backward", "optimizer")


def setup(overrides: list[str], steps: int, device: str):
    """(typed run settings, speed resolved for ``device``, DataModule, LightningModule) for a run of ``steps``
    steps, through train()'s own calls, so the parts timed are those of the module training builds."""
    run, speed = bench_train.setup(overrides, steps, device.split(":")[0])
    datamodule = build_datamodule(run.data, run.model.context_length, run.seed)
    return run, speed, datamodule, build_module(run, datamodule.tokenizer, speed.speed)


def time_parts(overrides: list[str], steps: int, warmup: int, device: str) -> dict:
    run, speed, datamodule, module = setup(overrides, steps + warmup, device)
    precision = choose(run.trainer["accelerator"], run.trainer["precision"]).precision  # auto: the device's
    module = module.to(device).train()
    model, optim = module.model, run.optim
    optimizer, schedule = optim.build(model, steps + warmup, optimizer_flags(speed.speed))
    autocast = torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=precision == "bf16-mixed")
    batches = datamodule.train_batches

    def clock() -> float:
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter()

    totals = dict.fromkeys(PARTS, 0.0)
    for step in range(steps + warmup):
        t0 = clock()
        x, y = batches.batch(step)
        x, y = x.to(device), y.to(device)
        t1 = clock()
        with autocast:
            loss, aux_loss = module.compute_loss(x, y)
        t2 = clock()
        optimizer.zero_grad(set_to_none=True)
        (loss + aux_loss).backward()
        t3 = clock()
        if optim.grad_clip > 0:  # 0 means no clipping, as for the Trainer's gradient_clip_val
            torch.nn.utils.clip_grad_norm_(model.parameters(), optim.grad_clip)
        optimizer.step()
        schedule.step()
        t4 = clock()
        if step >= warmup:
            for part, seconds in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                totals[part] += seconds
    per_step = {part: seconds / steps for part, seconds in totals.items()}
    tokens = x.numel()
    step_s = sum(per_step.values())
    peak = run.speed.peak_flops or matmul_peak(compute_dtype(precision))
    rate = tokens / step_s
    return {
        "tokenizer": run.data.tokenizer.name,
        "precision": precision,
        "vocab": datamodule.vocab_size,
        "parameters": model.num_parameters(),
        "tokens": tokens,
        "parts_ms": {k: v * 1e3 for k, v in per_step.items()},
        "step_ms": step_s * 1e3,
        "tokens_per_s": rate,
        "mfu": rate * model.flops_per_token() / peak if peak else None,
    }


@entry()
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default=None, help="also write the Markdown table here")
    parser.add_argument(
        "--tokenizers",
        default=None,
        help="comma list of data/tokenizer options to time one after another (003's table: char,bpe); "
        "default: the config's own",
    )
    parser.add_argument(
        "overrides", nargs="*", default=["experiment=blog"], help="config overrides (default: experiment=blog)"
    )
    args = parser.parse_args(argv)
    rows = []
    kinds = args.tokenizers.split(",") if args.tokenizers else [None]
    for kind in kinds:
        tokenizer = [] if kind is None else [f"data/tokenizer={kind}"]
        rows.append(time_parts([*args.overrides, *tokenizer], args.steps, args.warmup, args.device))
    lines = [
        f"# Step parts: `tinygpt-step-parts --steps {args.steps} --warmup {args.warmup} "
        + (f"--tokenizers {args.tokenizers} " if args.tokenizers else "")
        + f"{' '.join(args.overrides)}`",
        "",
        f"{platform.machine()}, device {args.device}, {torch.get_num_threads()} torch threads, torch "
        f"{torch.__version__}; milliseconds per step, averaged over {args.steps} steps.",
        "",
        "| tokens | precision | parameters | batch | forward | backward | optimizer | step | tokens/s | MFU |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        ms = r["parts_ms"]
        mfu = "" if r["mfu"] is None else f"{r['mfu']:.1%}"
        lines.append(
            f"| {r['tokenizer']} (V={r['vocab']:,}) | {r['precision']} | {r['parameters']:,} | {ms['batch']:.1f} | "
            f"{ms['forward']:.1f} | {ms['backward']:.1f} | {ms['optimizer']:.1f} | {r['step_ms']:.1f} | "
            f"{r['tokens_per_s']:,.0f} | {mfu} |"
        )
    text = "\n".join(lines) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
