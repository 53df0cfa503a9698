"""Generation speed with and without the KV cache (000, "Not recomputing the past"), on the CPU.

    tinygpt-bench-generate --out docs/benchmarks/generate.md   # 100, 500, 994 new tokens, 3 rounds; writes the page
    tinygpt-bench-generate --new-tokens 50 --repeats 2          # prints the table only

The model is 000's "all four changes, no biases" variant of its ablation base (model=since_gpt2 with RoPE,
RMSNorm, SwiGLU, 2 KV heads, no biases), with random weights and a 1,024-token context as in the spec's
run; greedy decoding from a 6-token prompt. The uncached run is the chapter-4 loop: every step reruns the
model over the whole text so far. The page in a checkout is docs/benchmarks/generate.md (--out writes it).

The runs are interleaved (cached, uncached, for each length, then again, --repeats rounds) so that load from
elsewhere falls on all of them alike, and each figure is the median over the rounds with its spread (min-max).
Only figures from a machine with nothing else running are worth quoting.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir

from tinygpt.bench.page import cpu_name, publish
from tinygpt.cli import CONF
from tinygpt.cli.config import register_configs
from tinygpt.cli.entry import entry
from tinygpt.common.typed import typed
from tinygpt.model import GPT, GPTConfig, generate

MODERN_SINCE_GPT2 = [
    "model=since_gpt2",
    "model/position=rope",
    "model/norm=rmsnorm",
    "model.mlp=swiglu",
    "model.n_kv_heads=2",
    "model.bias=false",
    "model.context_length=1024",
]


def benchmark_config() -> GPTConfig:
    """Composed from the real presets, so the benchmark measures exactly what a config run would build."""
    with initialize_config_dir(config_dir=CONF, version_base=None):
        cfg = compose(config_name="params", overrides=MODERN_SINCE_GPT2)
    return typed(GPTConfig, cfg.model, "model")


def timed_generate(model: GPT, prompt: torch.Tensor, n: int, use_cache: bool) -> tuple[torch.Tensor, float]:
    start = time.perf_counter()
    tokens = generate(model, prompt, n, greedy=True, use_cache=use_cache)
    return tokens, time.perf_counter() - start


@entry()
def main(argv: list[str] | None = None) -> int:
    register_configs()  # the typed schemas (tinygpt/cli/config.py), before Hydra composes
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--new-tokens", type=int, nargs="+", default=[100, 500, 994])
    parser.add_argument("--out", type=Path, default=None, help="also write the page (Markdown) here")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (median and spread)")
    args = parser.parse_args(argv)

    config = benchmark_config()
    torch.manual_seed(0)
    model = GPT(config).eval()
    prompt = torch.randint(0, config.vocab_size, (1, 6), generator=torch.Generator().manual_seed(0))
    timed_generate(model, prompt, 20, use_cache=True)  # warm-up: first calls pay for allocation and dispatch
    timed_generate(model, prompt, 20, use_cache=False)

    times: dict[tuple[int, bool], list[float]] = {}
    same: dict[int, bool] = {}
    for round_ in range(args.repeats):
        for n in args.new_tokens:
            cached, t_cached = timed_generate(model, prompt, n, use_cache=True)
            uncached, t_uncached = timed_generate(model, prompt, n, use_cache=False)
            times.setdefault((n, True), []).append(t_cached)
            times.setdefault((n, False), []).append(t_uncached)
            same[n] = same.get(n, True) and torch.equal(cached, uncached)
            print(f"[round {round_ + 1}] {n} tokens: uncached {t_uncached:.2f} s, cached {t_cached:.2f} s", flush=True)

    rows, speeds = [], {}
    for n in args.new_tokens:
        t_cached, t_uncached = statistics.median(times[n, True]), statistics.median(times[n, False])
        ratios = [u / c for u, c in zip(times[n, False], times[n, True], strict=True)]
        speeds[n] = (n / t_uncached, n / t_cached)
        rows.append(
            f"| {n} | {n / t_uncached:.1f} | {n / t_cached:.1f} | {t_uncached / t_cached:.1f}× "
            f"({min(ratios):.1f}-{max(ratios):.1f}) | {t_uncached:.1f} s ({min(times[n, False]):.1f}-"
            f"{max(times[n, False]):.1f}) | {t_cached:.2f} s ({min(times[n, True]):.2f}-"
            f"{max(times[n, True]):.2f}) | {'yes' if same[n] else 'NO'} |"
        )

    table = "\n".join(
        [
            "| new tokens | no cache (tokens/s) | cache (tokens/s) | speed-up (spread of rounds) | no cache, total "
            "| cache, total | same tokens |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | :---: |",
            *rows,
        ]
    )
    first, last = min(speeds), max(speeds)
    checks = [
        f"- cached / uncached at {last}: {speeds[last][1] / speeds[last][0]:.1f}× (target ≥ 20×)",
        f"- cached speed at {last} / cached speed at {first}: {speeds[last][1] / speeds[first][1]:.2f} (target ≥ 0.8)",
    ]
    doc = "\n".join(
        [
            "# Generation speed with and without the KV cache",
            "",
            "Produced by `tinygpt-bench-generate --out docs/benchmarks/generate.md`. Greedy decoding from a 6-token "
            "prompt, batch 1, "
            f'fp32 on the CPU. Model: 000\'s "all four, no biases" variant of `since_gpt2` '
            f"({model.num_parameters():,} parameters, random weights) with `context_length=1024`; overrides "
            f"`{' '.join(MODERN_SINCE_GPT2)}`. The uncached loop reruns the model over the whole text each step, "
            "as chapter 4's does; the cached one uses the preallocated KV cache. After a warm-up, "
            f"{args.repeats} interleaved rounds; medians, with the min-max over the rounds in brackets.",
            "",
            f"Machine: {cpu_name()}, {torch.get_num_threads()} torch threads, "
            f"torch {torch.__version__}, Python {platform.python_version()}.",
            "",
            table,
            "",
            *checks,
            "",
        ]
    )
    publish(doc, checks, args.out)
    return 0 if all(same.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
