"""Training throughput of the named shapes, Lightning against a plain loop, in one process.

    export TINYGPT_DATA=../shared/data
    python scripts/bench_train.py                                  # every shape, fp32 and bf16-mixed
    python scripts/bench_train.py --shapes llama003 --precisions bf16-mixed --steps 20
    python scripts/bench_train.py --shapes since_gpt2 --ab speed.loss=full,chunked --no-plain   # A/B a switch
    python scripts/bench_train.py --set speed.compile=true --warmup 5                           # any override
    python scripts/bench_train.py --set speed.malloc=system      # per-process switches: one process per value
    python scripts/bench_train.py --device cuda --shapes blog --precisions 32-true,bf16-mixed --no-plain

Shapes (the peers kit's, ../shared/peers/shapes.py): `blog` (003's experiment: PEPs, characters, dropout
0.2), `llama003` (Tiny Shakespeare, BPE 2,048, dropout 0), `nanogpt_d02` / `nanogpt_d0` (nanoGPT's
architecture, characters, dropout 0.2 / 0), `since_gpt2` (000's 29M model, GPT-2 tokens, 16 x 128), and `smoke`
(experiment=smoke's tiny model: the device check's --smoke mode, which exercises this script on a CPU).

`--device cuda` (or mps) times the same runs on a GPU: the speed switches resolved for that device as a run
resolves them (tinygpt/train/device_settings.py), batches copied to it, each step's end timed after the device
has finished it (torch.cuda.synchronize), and the matmul peak measured on the device.

Why it is built this way:
- Every run of a round is a fresh model from the same seed on the same batches, and the runs are interleaved
  (shape, precision, variant, loop; then again, --repeats times), so a burst of load elsewhere hits all of
  them alike rather than one setting; the table gives each setting's median over the rounds and its spread.
- The first --warmup steps are left out of the rate (allocation, and compilation with speed.compile=true);
  their time, from the start of fit to the end of step 1, is reported as the cold start.
- MFU divides by the peak of a large matmul measured in this process at the start of each round, so the
  ratio holds on any machine: tokens/s x (6N + 12·L·T·D) / peak (tinygpt/model/families.py). For since_gpt2 6N
  counts the 50,257 x 256 input table, which is a lookup, so its MFU is overstated by about 45%.
- The plain loop (forward and loss through GPTModule.compute_loss, so with the same switches; backward,
  clip, AdamW, schedule) is the reference for Lightning's overhead, which should stay within 3%.
Speed is measured here, never in tests. On a machine shared with other jobs every figure is rough.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import lightning as L
import torch

from tinygpt.cli.config import compose_run_config
from tinygpt.cli.entry import entry
from tinygpt.data import build_datamodule
from tinygpt.model.speed import optimizer_flags
from tinygpt.train import device_settings
from tinygpt.train.module import GPTModule, build_module
from tinygpt.train.peak import compute_dtype, matmul_peak
from tinygpt.train.provenance import device_name
from tinygpt.train.schema import parse_run_config

# nanoGPT's architecture, its exact nn.GELU() included (the peers kit's nanogpt shape runs model.mlp=gelu: tanh)
NANOGPT = [
    "data=shakespeare",
    "model.position=learned",
    "model.norm=layernorm",
    "model.mlp=gelu_exact",
    "model.bias=false",
]
SHAPES = {
    "blog": ["experiment=blog"],
    "llama003": ["data=shakespeare", "data/tokenizer=bpe", "data.tokenizer.vocab_size=2048", "model.dropout=0"],
    "nanogpt_d02": [*NANOGPT, "model.dropout=0.2"],
    "nanogpt_d0": [*NANOGPT, "model.dropout=0"],
    "since_gpt2": ["experiment=since_gpt2"],
    "smoke": ["experiment=smoke"],
}
PRECISIONS = ("32-true", "bf16-mixed")
DEVICES = ("cpu", "cuda", "mps")
PER_PROCESS = ("speed.malloc", "speed.tf32")  # settings of the process: one invocation per value


def setup(overrides: list[str], steps: int, device: str):
    """(typed run settings, speed switches resolved for ``device``) as a run of ``steps`` steps composes and
    checks them (train()'s calls: a bad switch fails here, before any timing); the DataModule and the module
    are then built by the calls train() builds them with (build_datamodule, build_module), so the bench times what
    training trains."""
    cfg = compose_run_config([*overrides, f"trainer.max_steps={steps}", f"trainer.val_check_interval={steps}"])
    run = parse_run_config(cfg)
    return run, device_settings.resolve(run.speed, device, bool(run.trainer.get("deterministic")))


def synchronize(device: str) -> None:
    """Wait for the device to finish its queued work, so a timestamp marks the end of a step, not its launch."""
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "mps":
        torch.mps.synchronize()


class StepTimes(L.Callback):
    def __init__(self, device: str = "cpu"):
        self.device = device
        self.start = 0.0
        self.ends: list[float] = []

    def on_train_start(self, trainer, pl_module):
        synchronize(self.device)
        self.start = time.perf_counter()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        synchronize(self.device)
        self.ends.append(time.perf_counter())


def plain_loop(module: GPTModule, batches, steps: int, precision: str, device: str) -> tuple[float, list[float]]:
    """What the Trainer does, by hand: loss (module.compute_loss), backward, clip, AdamW, schedule."""
    model = module.to(device).train()
    optimizer, schedule = module.optim_config.build(module.model, steps, optimizer_flags(module.speed_config))
    autocast = torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16-mixed")
    synchronize(device)
    start, ends = time.perf_counter(), []
    for step in range(steps):
        x, y = (t.to(device, non_blocking=True) for t in batches.batch(step))
        with autocast:
            loss, aux = model.compute_loss(x, y)
        optimizer.zero_grad(set_to_none=True)
        (loss + aux).backward()
        if module.optim_config.grad_clip > 0:  # 0: no clipping, as the Trainer reads gradient_clip_val
            torch.nn.utils.clip_grad_norm_(module.parameters(), module.optim_config.grad_clip)
        optimizer.step()
        schedule.step()
        synchronize(device)
        ends.append(time.perf_counter())
    return start, ends


def lightning_loop(module: GPTModule, datamodule, steps: int, precision: str, device: str) -> tuple[float, list[float]]:
    timer = StepTimes(device)
    trainer = L.Trainer(
        max_steps=steps,
        precision=precision,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=0,
        max_epochs=-1,
        callbacks=[timer],
        gradient_clip_val=module.optim_config.grad_clip,
        accelerator=device,
        devices=1,
    )
    trainer.fit(module, datamodule=datamodule)
    return timer.start, timer.ends


@entry()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"comma list of {', '.join(SHAPES)}")
    parser.add_argument("--precisions", default=",".join(PRECISIONS), help="comma list of 32-true, bf16-mixed")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=3, help="steps left out at the start of each run")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--ab", default=None, help="KEY=A,B[,...]: one variant per value, e.g. speed.loss=full,chunked")
    parser.add_argument("--set", action="append", default=[], help="an override for every run, e.g. speed.compile=true")
    parser.add_argument("--no-plain", action="store_true", help="skip the plain-loop reference")
    parser.add_argument("--out", type=Path, default=None, help="also write the Markdown table here")
    parser.add_argument("--device", default="cpu", choices=DEVICES, help="where to train (default: cpu)")
    args = parser.parse_args()

    shapes = args.shapes.split(",")
    precisions = args.precisions.split(",")
    for name in shapes:
        if name not in SHAPES:
            parser.error(f"--shapes: {name!r} is not a shape; choose from {', '.join(SHAPES)}")
    for precision in precisions:
        if precision not in PRECISIONS:
            parser.error(f"--precisions: {precision!r} is not allowed; choose from {', '.join(PRECISIONS)}")
    variants = [[]]
    if args.ab:
        key, _, values = args.ab.partition("=")
        if not values:
            parser.error(f"--ab {args.ab!r}: expected KEY=A,B, e.g. speed.loss=full,chunked")
        if key in PER_PROCESS:  # the setting belongs to the process: every variant would run with the last one
            parser.error(
                f"--ab {key}=...: the setting is per process; run one process per value, "
                f"interleaved (--set {key}=A, then --set {key}=B)"
            )
        variants = [[f"{key}={value}"] for value in values.split(",")]
    loops = ("lightning",) if args.no_plain else ("plain", "lightning")

    steps = args.warmup + args.steps
    settings = {}  # (shape, variant) -> (run, speed, datamodule)
    for name in shapes:
        datamodule = None
        for variant in variants:
            run, speed = setup([*SHAPES[name], *args.set, *variant], steps, args.device)
            device_settings.apply(speed.kind, speed.speed.tf32, speed.deterministic)
            if datamodule is None:
                datamodule = build_datamodule(run.data, run.model.context_length, run.seed)
            settings[name, " ".join(variant) or "defaults"] = (run, speed, datamodule)

    results: dict[tuple, list[tuple[float, float, float]]] = {}  # key -> [(tokens/s, MFU, cold start s)]
    peaks: dict[str, list[float]] = {p: [] for p in precisions}
    for round_ in range(args.repeats):
        for precision in precisions:
            peaks[precision].append(matmul_peak(compute_dtype(precision), args.device))
        for (name, variant), (run, speed, datamodule) in settings.items():
            tokens = run.data.batch_size * run.model.context_length
            for precision in precisions:
                for loop in loops:
                    module = build_module(run, datamodule.tokenizer, speed.speed)  # as train() builds it, seeded
                    if loop == "plain":
                        start, ends = plain_loop(module, datamodule.train_batches, steps, precision, args.device)
                    else:
                        start, ends = lightning_loop(module, datamodule, steps, precision, args.device)
                    rate = tokens * args.steps / (ends[-1] - ends[args.warmup - 1])
                    flops = module.model.flops_per_token()
                    mfu = rate * flops / peaks[precision][-1]
                    results.setdefault((name, precision, variant, loop), []).append((rate, mfu, ends[0] - start))
                    print(
                        f"[round {round_ + 1}] {name} {precision} {variant} {loop}: {rate:,.0f} tokens/s, "
                        f"MFU {mfu:.1%}, first step {ends[0] - start:.1f} s",
                        flush=True,
                    )

    lines = [
        f"`python scripts/bench_train.py {' '.join(_given_args())}` on {device_name(torch.device(args.device))}, "
        f"{torch.get_num_threads()} torch threads, torch {torch.__version__}: {args.repeats} interleaved rounds of "
        f"{args.warmup} + {args.steps} steps; median over the rounds (spread: min-max). Matmul peak measured "
        "in-process: " + ", ".join(f"{p} {statistics.median(v) / 1e9:.0f} GFLOP/s" for p, v in peaks.items()) + ".",
        "",
        "| shape | precision | variant | loop | tokens/s | spread | MFU | first step (s) |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for (name, precision, variant, loop), runs in results.items():
        rates = [r for r, _, _ in runs]
        lines.append(
            f"| {name} | {precision} | {variant} | {loop} | {statistics.median(rates):,.0f} | "
            f"{min(rates):,.0f}-{max(rates):,.0f} | {statistics.median(m for _, m, _ in runs):.1%} | "
            f"{statistics.median(c for _, _, c in runs):.1f} |"
        )
    lines += [
        "",
        "| shape | precision | variant | Lightning / plain | vs first variant (Lightning) |",
        "| --- | --- | --- | ---: | ---: |",
    ]
    for (name, precision, variant, loop), runs in results.items():
        if loop != "lightning":
            continue
        rate = statistics.median(r for r, _, _ in runs)
        plain = results.get((name, precision, variant, "plain"))
        overhead = f"{rate / statistics.median(r for r, _, _ in plain):.3f}" if plain else "-"
        first = next(v for (n, p, v, lp) in results if (n, p, lp) == (name, precision, "lightning"))
        base = statistics.median(r for r, _, _ in results[name, precision, first, "lightning"])
        lines.append(f"| {name} | {precision} | {variant} | {overhead} | {rate / base:.3f} |")
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)


def _given_args() -> list[str]:
    import sys

    return sys.argv[1:]


if __name__ == "__main__":
    raise SystemExit(main())
