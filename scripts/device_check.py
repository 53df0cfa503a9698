"""tinygpt checked and measured on a GPU, in one command that fits a short loan of one:

    python scripts/device_check.py --out DIR              # on the GPU machine, from a checkout (make device-check)
    python scripts/device_check.py --out DIR --smoke      # the same steps on the CPU at tiny sizes (the test suite)

Everything it finds goes into DIR (small files only: checkpoints stay in --work):
- env.json: torch, CUDA, the device's name, capability and memory, the CPU cores, tinygpt's commit;
- device_tests.log / .xml: tests/test_device.py's ``cuda`` (or ``mps``) tests on the device;
- bench_*.md: scripts/bench_train.py on the device for 003's shape (blog) and 000's (since_gpt2): 32-true,
  32-true with TF32, bf16-mixed, and compile off / on; tokens/s and MFU against a matmul peak measured in the
  same process;
- card_k1/, card_k4/: the design card's ``-m model.position=rope,learned seed=0,1`` placed with
  ``sweep.jobs_per_device=1`` and ``=4``, each sweep's placement.json files and report, and its wall time;
- then, in the time that remains, 003's six-variant ablation at its full 4,000 steps and 000's 18-run table at 600
  steps as packed sweeps (``sweep.jobs_per_device=auto``), each with report.md, runs.csv and curves.png; a table
  cut short by the budget says how far it got (rerunning the command resumes its sweep from --work);
- summary.md: each step, its status and wall time, and the figures above in one place.

Each step has a share of ``--budget-s`` (default 540 s: a 10-minute command with time to spare) and a step that
would start past the deadline is skipped and says so. ``--smoke`` runs every step, through the same functions,
on the CPU at tiny sizes: the device tests on the CPU (TINYGPT_DEVICE_TESTS_ON=cpu), the bench on experiment=smoke,
the card and the tables on the smoke model for a few steps, packed on one simulated device; tests/test_device_check.py
runs it, so this script cannot rot while no GPU is at hand.

The GPU machine this project is sometimes lent has torch with CUDA and Lightning but not hydra-core, omegaconf or
antlr4-python3-runtime and no package index: the README's "Training on a GPU" says how to bring them as wheels.
Subprocesses get PYTHONPATH=<checkout>, so nothing needs installing beyond those.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CARD = ["model.position=rope,learned", "seed=0,1"]
BLOG_VARIANTS = ("baseline", "cosine", "no_position", "learned_position", "post_norm", "no_residual")
TABLES = {
    # name: (the spec's command's overrides, report style)
    "blog_ablation_4000": (
        [
            "experiment=blog",
            "blog_ablation=baseline,cosine,no_position,learned_position,post_norm,no_residual",
            "seed=0,1",
        ],
        "steps",
    ),
    "since_gpt2_600": (
        ["experiment=since_gpt2", "ablation=gpt2,rmsnorm,rope,swiglu,gqa,modern", "seed=1,2,3"],
        "seeds",
    ),
}
SMOKE_MODEL = ["experiment=smoke", "trainer.max_steps=4", "trainer.val_check_interval=2"]
# --smoke: each table's sweep with two of its variants and one seed, shrunk to seconds
SMOKE_SIZES = [
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "model.n_layers=1",
    "model.d_model=32",
    "model.n_heads=2",
    "model.context_length=32",
    "data.batch_size=4",
]
SMOKE_TABLE = "since_gpt2_600"  # the one --smoke runs: its dev split is the smaller, so it scores in seconds
SMOKE_TABLES = {
    "blog_ablation_4000": ["experiment=blog", "blog_ablation=baseline,cosine", "seed=0", *SMOKE_SIZES],
    "since_gpt2_600": ["experiment=since_gpt2", "ablation=gpt2,rope", "seed=1", *SMOKE_SIZES],
}
# the small files of a sweep that come back (checkpoints and TensorBoard logs stay in --work)
KEPT = ("report.md", "runs.csv", "comparison.csv", "curves.png", "jobs_per_device.json")
KEPT_PER_JOB = ("run.json", "placement.json")


class Check:
    def __init__(self, out: Path, work: Path, budget_s: float, smoke: bool, device: str):
        self.out, self.work, self.smoke, self.device = out, work, smoke, device
        self.start = time.monotonic()
        self.deadline = self.start + budget_s
        self.rows: list[tuple[str, str, float, str]] = []  # step, status, wall s, figures
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self.env.setdefault("TINYGPT_LEASE_DIR", str(work / "leases"))
        if smoke:
            self.env["TINYGPT_DEVICE_TESTS_ON"] = "cpu"

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, step: str, command: list[str], log: str, share: float | None = None) -> tuple[int | None, float]:
        """Run ``command`` (a list), its output into ``log`` under DIR; at most ``share`` of the time left, never past
        the deadline. Returns (exit status or None when skipped / timed out, wall seconds)."""
        limit = self.left() if share is None else min(self.left(), share)
        if limit < 5:  # the caller's row says "stopped or skipped"; the log says which
            with open(self.out / log, "a") as sink:
                sink.write(f"[device_check] {step}: skipped, {self.left():.0f} s of the budget left\n")
            return None, 0.0
        began = time.monotonic()
        with open(self.out / log, "a") as sink:
            sink.write(f"$ {' '.join(command)}\n")
            sink.flush()
            try:
                done = subprocess.run(
                    command, stdout=sink, stderr=subprocess.STDOUT, env=self.env, cwd=self.work, timeout=limit
                )
                status = done.returncode
            except subprocess.TimeoutExpired:
                sink.write(f"\n[device_check] stopped after {limit:.0f} s (its share of the budget)\n")
                status = None
        return status, time.monotonic() - began

    def python(self, script: str, *args: str) -> list[str]:
        return [sys.executable, str(ROOT / script), *args]


def environment(check: Check) -> dict:
    import torch

    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": check.device,
        "cpu_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "machine": platform.machine(),
        "smoke": check.smoke,
    }
    if check.device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(
            name=props.name,
            capability=f"{props.major}.{props.minor}",
            memory_bytes=props.total_memory,
            device_count=torch.cuda.device_count(),
            bf16=torch.cuda.is_bf16_supported(),
        )
    elif check.device == "mps":
        info.update(name="Apple GPU (mps)", memory_bytes=torch.mps.recommended_max_memory())
    try:
        info["commit"] = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except OSError:
        info["commit"] = None
    return info


def device_tests(check: Check) -> None:
    marker = "mps" if check.device == "mps" else "cuda"
    status, wall = check.run(
        "device tests",
        [
            sys.executable,
            "-m",
            "pytest",
            str(ROOT / "tests" / "test_device.py"),
            "-m",
            marker,
            "-rs",
            "-q",
            f"--junitxml={check.out / 'device_tests.xml'}",
            "-p",
            "no:cacheprovider",
        ],
        "device_tests.log",
        share=150,
    )
    tail = (check.out / "device_tests.log").read_text().strip().splitlines()[-1:] or [""]
    check.rows.append(("device tests", _status(status), wall, tail[0]))


def bench(check: Check) -> None:
    shapes = "smoke" if check.smoke else "blog,since_gpt2"
    timing = ["--steps", "2", "--warmup", "1", "--repeats", "1"] if check.smoke else ["--steps", "20", "--warmup", "5"]
    runs = {
        "bench_precisions.md": ["--precisions", "32-true,bf16-mixed"],
        "bench_tf32.md": ["--precisions", "32-true", "--set", "speed.tf32=true"],
        "bench_compile.md": [
            "--precisions",
            "32-true" if check.smoke else "bf16-mixed",
            "--ab",
            "speed.compile=false" if check.smoke else "speed.compile=false,true",
        ],
    }
    for name, extra in runs.items():
        if check.smoke and name != "bench_precisions.md":  # the same script and code path with other arguments
            check.rows.append((f"bench ({name})", "skipped in --smoke: bench_precisions.md ran the same code", 0, ""))
            continue
        command = check.python(
            "scripts/bench_train.py",
            "--device",
            check.device,
            "--shapes",
            shapes,
            "--no-plain",
            *timing,
            *extra,
            "--out",
            str(check.out / name),
        )
        status, wall = check.run(f"bench {name}", command, "bench.log", share=90)
        check.rows.append((f"bench ({name})", _status(status), wall, f"[{name}]({name})" if status == 0 else ""))


def sweep(
    check: Check, name: str, overrides: list[str], style: str, share: float | None, report: bool = True
) -> tuple[int | None, float]:
    """One multirun into --work/<name>, then its report (unless ``report`` is false); the small files copied into
    DIR/<name>."""
    sweep_dir = check.work / name
    pool = ["sweep.simulate_devices=1"] if check.smoke else [f"trainer.accelerator={check.device}"]
    command = check.python(
        "scripts/train.py",
        "-m",
        *overrides,
        *pool,
        f"hydra.sweep.dir={sweep_dir}",
        "progress.style=lines",
        "progress.every_n_steps=100",
    )
    status, wall = check.run(name, command, f"{name}.log", share)
    if sweep_dir.is_dir() and report:
        check.run(f"{name} report", check.python("scripts/report.py", str(sweep_dir), "--style", style), f"{name}.log")
    if sweep_dir.is_dir():
        kept = check.out / name
        kept.mkdir(exist_ok=True)
        for file in KEPT:
            if (sweep_dir / file).is_file():
                shutil.copy2(sweep_dir / file, kept / file)
        for job in sorted(p for p in sweep_dir.iterdir() if p.is_dir()):
            for file in KEPT_PER_JOB:
                if (job / file).is_file():
                    (kept / job.name).mkdir(exist_ok=True)
                    shutil.copy2(job / file, kept / job.name / file)
    return status, wall


def design_card(check: Check) -> None:
    """The card's four jobs one at a time per device, then four packed on it: the packing's throughput gain."""
    # --smoke: two of the card's jobs, packed two to a device, and no report (the tables' step writes one)
    card = [CARD[0], "seed=0", *SMOKE_MODEL] if check.smoke else CARD
    packed = 2 if check.smoke else 4
    walls = {}
    for k in (1, packed):
        overrides = [*card, f"sweep.jobs_per_device={k}"]
        status, wall = sweep(check, f"card_k{k}", overrides, "steps", 120, report=not check.smoke)
        walls[k] = wall if status == 0 else None
        check.rows.append((f"design card, jobs_per_device={k}", _status(status), wall, ""))
    if walls[1] and walls[packed]:
        check.rows.append(
            (
                f"design card: jobs_per_device={packed} vs 1",
                "measured",
                0.0,
                f"{walls[1] / walls[packed]:.2f}x the throughput ({walls[1]:.0f} s / {walls[packed]:.0f} s)",
            )
        )


def tables(check: Check) -> None:
    for name, (overrides, style) in TABLES.items():
        if check.smoke and name != SMOKE_TABLE:  # the same function with another table's overrides
            check.rows.append((f"table {name}", f"skipped in --smoke: table {SMOKE_TABLE} ran the same code", 0.0, ""))
            continue
        # packed as auto decides on a GPU; --smoke: two slots of one simulated device (auto needs device memory)
        packing = "sweep.jobs_per_device=2" if check.smoke else "sweep.jobs_per_device=auto"
        overrides = SMOKE_TABLES[name] if check.smoke else overrides
        status, wall = sweep(check, name, [*overrides, packing], style, None)
        finished = len(list((check.out / name).glob("*/run.json"))) if (check.out / name).is_dir() else 0
        check.rows.append((f"table {name}", _status(status), wall, f"{finished} job(s) with a run record"))


def _status(code: int | None) -> str:
    return {None: "stopped or skipped", 0: "passed"}.get(code, f"failed (exit {code})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="where the outputs go (small files only)")
    parser.add_argument("--work", type=Path, default=None, help="sweep folders with checkpoints (default: a temp dir)")
    parser.add_argument("--budget-s", type=float, default=540, help="the whole check's wall-clock budget")
    parser.add_argument("--smoke", action="store_true", help="the same steps on the CPU at tiny sizes")
    parser.add_argument("--device", default="auto", choices=("auto", "cuda", "mps", "cpu"))
    args = parser.parse_args(argv)

    import torch

    device = args.device
    if args.smoke:
        device = "cpu"
    elif device == "auto":
        device = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else None
        if device is None:
            parser.error("no CUDA or MPS device here: run on a GPU machine, or --smoke to check the script on the CPU")
    if not os.environ.get("TINYGPT_DATA"):
        parser.error("TINYGPT_DATA is not set: point it at the data root (corpora and gpt2/) on this machine")
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(os.environ.get("TMPDIR", "/tmp")) / "tinygpt-device-check"
    work.mkdir(parents=True, exist_ok=True)
    check = Check(args.out.resolve(), work.resolve(), args.budget_s, args.smoke, device)

    (check.out / "env.json").write_text(json.dumps(environment(check), indent=2) + "\n")
    check.rows.append(("environment", "written", 0.0, "[env.json](env.json)"))
    for step in (device_tests, bench, design_card, tables):
        step(check)

    lines = [
        f"# Device check on {device}{' (smoke: CPU, tiny sizes)' if args.smoke else ''}",
        "",
        f"`python scripts/device_check.py {' '.join(argv if argv is not None else sys.argv[1:])}`, "
        f"{time.monotonic() - check.start:.0f} s of a {args.budget_s:.0f} s budget.",
        "",
        "| step | status | wall (s) | figures |",
        "| --- | --- | ---: | --- |",
        *(f"| {step} | {status} | {wall:.0f} | {figures} |" for step, status, wall, figures in check.rows),
    ]
    (check.out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(not status.startswith("failed") for _, status, _, _ in check.rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
