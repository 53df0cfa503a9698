"""The data path's speed and memory: preparing a corpus against its tokenizer's own speed, a run's peak memory and
start-up on a tiny and a large prepared corpus, and the batch loader's throughput.

    tinygpt-bench-data --work ~/bench-data --out docs/benchmarks/data.md   # a 2 GiB corpus; writes the page
    tinygpt-bench-data --work /tmp/bench-data --large-mb 16 --sample-mb 2 --repeats 1   # a smoke run

The corpora are written under --work from the text of the data root's corpora (peps, tinyshakespeare, timemachine,
cycled into documents of 8 MiB, each headed by its number): a tiny one of 2 MiB and a large one of --large-mb. What
is measured, each in its own way:

- **prepare**: ``prepare_corpus`` (what tinygpt-prepare and every run's set-up call) on --sample-mb of the corpus, in
  a fresh prepared folder, for GPT-2's tokens, a byte-level BPE fitted on the train split (its fitting included)
  and characters; beside it the tokenizer's own encoder on the same documents, cut into parts of about 1 MiB, on
  every core (``encode_batch`` of HF ``tokenizers``, its best batch; the character tokenizer's numpy encoder, a
  thread a core), the ceiling a prepare cannot pass. Both in MB/s of UTF-8 text, --repeats rounds of the two
  interleaved after one that warms up; "a thread" divides by the cores. A bpe prepare also fits the BPE, so it is
  also set beside ``tokenizers``' own trainer on the same train documents and parts followed by ``encode_batch``.
  And every prepare reads its text from files, which the tokenizers alone do not: decoding the same bytes once
  (``bytes.decode``, on one thread, as Python does it) is timed too, the floor of any prepare (it is the UTF-8 check),
  and the prepare is also set beside that decoding and the encoder, one after the other.
- **a run's peak memory and start-up**: ``tinygpt-train experiment=smoke`` for 1 step on each corpus (no dev
  split; and the large one again with the last 10% of its text as dev, four batches of it scored;
  ``speed.peak_flops`` given, so no peak is measured), each corpus prepared beforehand by tinygpt-prepare in
  a process of its own (whose time and peak RSS are given too), as a child process: its peak RSS (``VmHWM``) and
  its wall time, which differ between the two corpora only by what the data's set-up costs. Interleaved tiny,
  large, tiny, large (--repeats rounds).
- **loader**: ``RandomWindows`` over the large corpus's mapped train split, batch 64 × 256, on one thread: the
  tokens a second of the training loop's time it takes to hand the model its batches, from the page cache and from
  disk, as a run reads them and by indexing the map (``loader_rates``).

Only figures from a machine with nothing else running are worth quoting (the page says which machine).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from tinygpt.bench.page import cpu_name, publish
from tinygpt.cli.entry import entry
from tinygpt.common.typed import typed
from tinygpt.data.batches import RandomWindows
from tinygpt.data.config import DataConfig
from tinygpt.data.datamodule import prepare_corpus
from tinygpt.data.documents import read_piece, read_piece_bytes, split_text
from tinygpt.data.encoded import PART_CHARS
from tinygpt.data.errors import DataError
from tinygpt.data.root import resolve_data_root

MIB = 1 << 20
DOCUMENT_MIB = 8
TINY_MIB = 2
SOURCES = ("peps", "tinyshakespeare", "timemachine")
TOKENIZERS = {"gpt2": ["data/tokenizer=gpt2"], "bpe": ["data/tokenizer=bpe"], "char": ["data/tokenizer=char"]}


def source_text() -> str:
    """Every text file of the data root's corpora, concatenated: the material the corpora are cycled from."""
    root = resolve_data_root(None).path
    parts = []
    for name in SOURCES:
        for path in sorted((root / name).rglob("*")):
            if path.is_file() and path.suffix in (".txt", ".rst", ""):
                try:
                    parts.append(path.read_text(encoding="utf-8"))
                except UnicodeDecodeError:
                    continue
    if not parts:
        raise DataError(f"no text under {root} ({', '.join(SOURCES)}): set TINYGPT_DATA")
    return "\n".join(parts)


def write_corpus(folder: Path, total_mib: float, text: str) -> Path:
    """``folder`` filled with documents of DOCUMENT_MIB (the last one shorter) cycled from ``text``, each headed by
    its number so that no two are alike; at least four, so that one can go to test and one to dev."""
    if folder.is_dir():
        return folder
    staging = folder.with_name(folder.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    total = int(total_mib * MIB)
    size = min(DOCUMENT_MIB * MIB, max(total // 4, 1))
    raw = text.encode("utf-8")
    written, index, offset = 0, 0, 0
    while written < total:
        want = min(size, total - written)
        with open(staging / f"doc{index:05d}.txt", "wb") as f:
            head = f"Document {index}\n".encode()
            f.write(head)
            left = want - len(head)
            while left > 0:
                piece = raw[offset : offset + left]
                cut = piece.rfind(b"\n") + 1 if len(piece) == left else len(piece)  # whole lines: valid UTF-8
                piece = piece[: cut or len(piece)]
                f.write(piece)
                left -= len(piece)
                offset = (offset + len(piece)) % len(raw)
                if len(piece) == 0:
                    break
        written += want
        index += 1
    staging.rename(folder)
    return folder


# the dev split of the prepares and the runs: one document (the prepare rates); none (the runs, whose one step
# would score a dev document of megabytes, which is not start-up); the last 10% of the text (the large corpus's
# third run, whose scoring is cut to four batches: the dev split is mapped, so its size must not show)
DEV_SPLITS = {
    True: ["data.dev=documents", "data.dev_k=1"],
    False: ["data.dev=none"],
    "tail": ["data.dev=tail", "data.dev_fraction=0.1"],
}


def data_overrides(corpus: Path, dev: bool | str = True) -> list[str]:
    """The corpus as ``data=textdir``: one document held out, the dev split of ``DEV_SPLITS[dev]``."""
    return [
        "data=textdir",
        f"data.path={corpus}",
        "data.glob=*.txt",
        "data.split_by=choice",  # a seeded choice of one held-out document, as every committed figure was made
        "data.test_k=1",
        *DEV_SPLITS[dev],
    ]


def data_config(corpus: Path, tokenizer: str, dev: bool = True) -> DataConfig:
    from tinygpt.cli.config import compose_run_config

    cfg = compose_run_config([*data_overrides(corpus, dev), *TOKENIZERS[tokenizer]])
    return typed(DataConfig, cfg.data, "data", DataError)


def time_prepare(
    corpus: Path, tokenizer: str, prepared: Path, fresh: bool = True, dev: bool = True
) -> tuple[float, int]:
    """Seconds for prepare_corpus (in an empty prepared folder when ``fresh``), and the UTF-8 bytes of the
    documents it encoded."""
    if fresh:
        shutil.rmtree(prepared, ignore_errors=True)
    os.environ["TINYGPT_PREPARED"] = str(prepared)
    config = data_config(corpus, tokenizer, dev)
    start = time.perf_counter()
    _, _, _, splits = prepare_corpus(config)
    seconds = time.perf_counter() - start
    return seconds, splits.manifest["train"]["bytes"] + (splits.manifest["dev"] or {}).get("bytes", 0)


def time_fit(corpus: Path, tokenizer: str, prepared: Path) -> float:
    """Seconds ``tokenizers``' own BPE trainer takes to fit the same vocabulary on the same train documents, in the
    same 1 MiB parts (its best batch): the part of a bpe prepare that is the library's fitting, not tinygpt's."""
    from tinygpt.data.tokenizers import train_bpe

    os.environ["TINYGPT_PREPARED"] = str(prepared)
    config = data_config(corpus, tokenizer)
    _, _, plan, _ = prepare_corpus(config)  # mapped: prepared by time_prepare
    texts = [read_piece(piece) for piece in plan.train]
    parts = [part for text in texts for part in split_text(text, PART_CHARS)]
    start = time.perf_counter()
    train_bpe(parts, config.tokenizer.vocab_size)
    return time.perf_counter() - start


def time_ceiling(corpus: Path, tokenizer: str, prepared: Path) -> tuple[float, int, float]:
    """Seconds the tokenizer alone takes to encode the same train and dev documents (the folder's tokenizer), their
    UTF-8 bytes, and seconds to decode those bytes once: what any prepare from files does at least once a byte (it
    is the UTF-8 check every corpus gets), on one thread, since ``bytes.decode`` holds the GIL. The tokenizers
    encode text already decoded, so a prepare's overhead against them includes this decoding."""
    os.environ["TINYGPT_PREPARED"] = str(prepared)
    _, _, plan, splits = prepare_corpus(data_config(corpus, tokenizer))  # mapped: prepared by time_prepare
    raws = [read_piece_bytes(piece) for piece in plan.train + plan.dev]
    start = time.perf_counter()
    texts = [raw.decode("utf-8") for raw in raws]
    decode_s = time.perf_counter() - start
    encoder = splits.tokenizer
    hf = getattr(encoder, "hf", None)
    # the best batch for encode_batch: the documents in parts of about 1 MiB (cut where no token crosses), so every
    # core has work to the end; whole documents of 8 MiB would leave cores idle while the last ones are encoded
    parts = [part for text in texts for part in split_text(text, PART_CHARS)]
    start = time.perf_counter()
    if hf is not None:
        hf.encode_batch(parts, add_special_tokens=False)
    else:  # the numpy encoders run the parts on a thread per core, as encode_batch does, into their narrowest arrays
        encoder.encode_many_arrays(parts)
    return time.perf_counter() - start, sum(len(raw) for raw in raws), decode_s


def child(command: list[str], env: dict) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of ``command`` run as a child process. The peak is the child's own
    ``VmHWM`` (/proc/PID/status), read until it exits: ``wait4``'s ``ru_maxrss`` would also count the pages this
    process held when it forked the child."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0.0
    status = Path(f"/proc/{process.pid}/status")
    while process.poll() is None:
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]) / 1024)
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    seconds = time.perf_counter() - start
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])} ... failed: {process.stderr.read().decode()[-2000:]}")
    return seconds, peak


def prepare_child(corpus: Path, prepared: Path, dev: bool | str = False) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of tinygpt-prepare on ``corpus`` (characters), as the runs read it."""
    command = [sys.executable, "-m", "tinygpt.cli.prepare", *data_overrides(corpus, dev), *TOKENIZERS["char"]]
    return child(command, {**os.environ, "TINYGPT_PREPARED": str(prepared)})


def run_one_step(corpus: Path, run_dir: Path, prepared: Path, dev: bool | str = False) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of a 1-step tinygpt-train on ``corpus`` in a child process."""
    shutil.rmtree(run_dir, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "tinygpt.cli.train",
        "experiment=smoke",
        *data_overrides(corpus, dev),
        *(["+trainer.limit_val_batches=4"] if dev else []),
        *TOKENIZERS["char"],
        "trainer.max_steps=1",
        "trainer.val_check_interval=1",
        "sample.max_new_tokens=0",
        "speed.peak_flops=1e11",  # not measured: its matmuls would set the peak RSS the corpus's share hides under
        f"hydra.run.dir={run_dir}",
    ]
    return child(command, {**os.environ, "TINYGPT_PREPARED": str(prepared)})


STEP_SECONDS = 0.016  # a model's step between batches: 64 × 256 tokens at the 1 M tokens/s of a GPT-2 124M on an H100
LOADER_CASES = (
    "page cache",
    "page cache, indexing the map",
    "disk",
    "disk, indexing the map",
    "disk, a step between batches",
)


def loader_rates(corpus: Path, prepared: Path, repeats: int, steps: int = 200) -> tuple[dict[str, list[float]], int]:
    """Tokens a second of the training loop's time that ``RandomWindows`` takes to hand over batches of 64 × 256
    from the large corpus's train split, on one thread, each round over windows no round drew before: from the page
    cache (the file read through first) and from disk (its pages dropped first, ``POSIX_FADV_DONTNEED``), as a run
    reads it (``preadv``, a batch's pages asked for first: tinygpt/data/window_reads.py) and by indexing the memory
    map; and from disk with STEP_SECONDS of busy waiting between batches standing for the model's step, as a
    training loop's thread is busy between its batches (only the time inside ``batch`` counts)."""
    os.environ["TINYGPT_PREPARED"] = str(prepared)
    _, _, _, splits = prepare_corpus(data_config(corpus, "char", dev=False))
    path, count, dtype = splits.folder / "train.ids", len(splits.train.tokens), splits.train.tokens.dtype
    torch.set_num_threads(1)
    rates: dict[str, list[float]] = {case: [] for case in LOADER_CASES}
    for round_ in range(repeats):
        first = (round_ + 1) * 10 * steps
        for case in LOADER_CASES:
            if case.startswith("disk"):
                fd = os.open(path, os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.close(fd)
            else:
                with open(path, "rb") as f:
                    while f.read(64 * MIB):
                        pass
            tokens = np.memmap(path, dtype=dtype, mode="r", shape=(count,))
            windows = RandomWindows(np.asarray(tokens) if "map" in case else tokens, 64, 256, seed=0)
            pause = STEP_SECONDS if "step" in case else 0.0
            inside = 0.0
            for step in range(first, first + steps):
                start = time.perf_counter()
                windows.batch(step)
                inside += time.perf_counter() - start
                until = time.perf_counter() + pause
                while time.perf_counter() < until:  # busy, as a step is: a sleeping thread's next reads differ
                    pass
            rates[case].append(steps * 64 * 256 / inside)
            print(f"[round {round_ + 1}] loader, {case}: {rates[case][-1] / 1e6:,.1f} M tokens/s", flush=True)
            del windows, tokens  # unmapped: the next round's drop reaches every page
    return rates, count


LARGE_DEV = "large, dev = last 10%"  # the large corpus with a dev split of a tenth of its text


def spread(values: list[float], fmt: str) -> str:
    return f"{format(statistics.median(values), fmt)} ({format(min(values), fmt)}–{format(max(values), fmt)})"


@entry()
def main(argv: list[str] | None = None) -> int:
    from tinygpt.cli.config import register_configs

    register_configs()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, required=True, help="where the corpora and prepared folders go")
    parser.add_argument("--large-mb", type=float, default=2048, help="the large corpus, MiB of text")
    parser.add_argument("--sample-mb", type=float, default=32, help="the corpus the prepare rates are taken on")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved rounds of the run measurements")
    parser.add_argument("--out", type=Path, default=None, help="also write the page (Markdown) here")
    args = parser.parse_args(argv)
    work = args.work.expanduser().resolve()
    work.mkdir(parents=True, exist_ok=True)

    text = source_text()
    sample = write_corpus(work / f"sample-{args.sample_mb:g}m", args.sample_mb, text)
    tiny = write_corpus(work / f"tiny-{TINY_MIB}m", TINY_MIB, text)
    large = write_corpus(work / f"large-{args.large_mb:g}m", args.large_mb, text)

    prepared = work / "prepared-runs"  # both corpora prepared first, each by tinygpt-prepare in its own process
    shutil.rmtree(prepared, ignore_errors=True)
    cases = {"large": (large, False), "tiny": (tiny, False), LARGE_DEV: (large, "tail")}
    prepares = {name: prepare_child(corpus, prepared, dev) for name, (corpus, dev) in cases.items()}
    for name, (seconds, rss) in prepares.items():
        print(f"tinygpt-prepare {name}: {seconds:,.1f} s, peak RSS {rss:,.0f} MiB", flush=True)

    runs: dict[str, list[tuple[float, float]]] = {"tiny": [], "large": [], LARGE_DEV: []}
    for round_ in range(args.repeats):
        for name in runs:
            corpus, dev = cases[name]
            seconds, rss = run_one_step(corpus, work / "run", prepared, dev)
            runs[name].append((seconds, rss))
            print(f"[round {round_ + 1}] {name}: {seconds:.1f} s, peak RSS {rss:,.0f} MiB", flush=True)

    prepare_rows, fit_rows, overheads, beyond = [], [], [], []
    for name in TOKENIZERS:
        rates: dict[str, list[float]] = {"prepare": [], "alone": [], "fit": [], "decode": [], "floor": []}
        for round_ in range(args.repeats + 1):  # prepare, alone, prepare, alone, ...; the first pair warms up
            seconds, n_bytes = time_prepare(sample, name, work / "prepared-sample")
            ceiling_s, ceiling_bytes, decode_s = time_ceiling(sample, name, work / "prepared-sample")
            fit_s = time_fit(sample, name, work / "prepared-sample") if name == "bpe" else None
            ours, theirs = n_bytes / seconds / MIB, ceiling_bytes / ceiling_s / MIB
            decode, floor = ceiling_bytes / decode_s / MIB, ceiling_bytes / (decode_s + ceiling_s) / MIB
            print(
                f"[round {round_}] prepare {name}: {ours:,.2f} MB/s; the tokenizer alone {theirs:,.2f} MB/s, "
                f"decoding once {decode:,.2f} MB/s"
                + ("" if fit_s is None else f", its fit and encoding {ceiling_bytes / (ceiling_s + fit_s) / MIB:,.2f}"),
                flush=True,
            )
            if round_:
                rates["prepare"].append(ours)
                rates["alone"].append(theirs)
                rates["decode"].append(decode)
                rates["floor"].append(floor)
                if fit_s is not None:
                    rates["fit"].append(ceiling_bytes / (ceiling_s + fit_s) / MIB)
        threads = os.cpu_count() or 1  # tokenizers' encode_batch and the numpy encoders alike
        ours, theirs = statistics.median(rates["prepare"]), statistics.median(rates["alone"])
        floor = statistics.median(rates["floor"])
        prepare_rows.append(
            f"| {name} | {spread(rates['prepare'], ',.2f')} | {ours / threads:,.2f} | {spread(rates['alone'], ',.2f')} "
            f"| {theirs / threads:,.2f} | {threads} | {1 - ours / theirs:.0%} | {spread(rates['decode'], ',.2f')} "
            f"| {1 - ours / floor:.0%} |"
        )
        beyond.append(f"{name} {1 - ours / floor:.0%}")
        if rates["fit"]:  # a fitted tokenizer: also against the library's own fit and encoding
            fitted = statistics.median(rates["fit"])
            fit_rows.append(
                f"| {name} | {spread(rates['prepare'], ',.2f')} | {spread(rates['fit'], ',.2f')} "
                f"| {1 - ours / fitted:.0%} |"
            )
            overheads.append(f"{name} {1 - ours / theirs:.0%} ({1 - ours / fitted:.0%} against its fit and encoding)")
        else:
            overheads.append(f"{name} {1 - ours / theirs:.0%}")

    loader, train_tokens = loader_rates(large, prepared, args.repeats)
    rate = {case: statistics.median(values) / 1e6 for case, values in loader.items()}

    large_text = sum(path.stat().st_size for path in large.glob("*.txt"))
    walls = {name: [s for s, _ in values] for name, values in runs.items()}
    rsss = {name: [r for _, r in values] for name, values in runs.items()}
    rss_gap = statistics.median(rsss["large"]) - statistics.median(rsss["tiny"])
    wall_gap = statistics.median(walls["large"]) - statistics.median(walls["tiny"])
    dev_gap = statistics.median(rsss[LARGE_DEV]) - statistics.median(rsss["large"])
    checks = [
        f"- prepare overhead against the tokenizer alone: {', '.join(overheads)} (goal ≤ 20%)",
        f"- prepare overhead against decoding the text once and the tokenizer alone: {', '.join(beyond)}",
        f"- a run's peak RSS, large − tiny: {rss_gap:+,.0f} MiB (goal ≤ 100 MiB)",
        f"- a run's peak RSS with a dev split of 10% of the large corpus, against none: {dev_gap:+,.0f} MiB",
        f"- 1-step run's wall time, large − tiny: {wall_gap:+,.1f} s (goal ≤ 5 s)",
        f"- loader from the page cache: {rate['page cache']:,.1f} M tokens/s on one thread (goal ≥ 20 M; indexing "
        f"the map {rate['page cache, indexing the map']:,.1f})",
        f"- loader from disk: {rate['disk']:,.1f} M tokens/s (indexing the map {rate['disk, indexing the map']:,.1f}); "
        f"with a step of {STEP_SECONDS * 1e3:g} ms between batches {rate['disk, a step between batches']:,.1f}",
    ]
    doc = "\n".join(
        [
            "# The data path: preparing, memory, start-up, loading",
            "",
            f"Produced by `tinygpt-bench-data --work WORK --large-mb {args.large_mb:g} --sample-mb {args.sample_mb:g} "
            f"--repeats {args.repeats} --out docs/benchmarks/data.md` (tinygpt/bench/data.py says what each "
            "figure is).",
            "",
            f"Machine: {cpu_name()}, {os.cpu_count()} cores, torch {torch.__version__}, "
            f"Python {platform.python_version()}.",
            "",
            f"## Preparing ({args.sample_mb:g} MiB, MB/s of UTF-8 text)",
            "",
            f"Median (lowest–highest) of {args.repeats} rounds, prepare and the tokenizer alone interleaved, after a "
            "round that warms up; the overhead compares the medians. The tokenizers encode text already decoded; "
            "decoding its UTF-8 once (`bytes.decode`, one thread: it holds the GIL) is what any prepare from files "
            "does at least, as the UTF-8 check every corpus gets, and the last column sets the prepare against "
            "that decoding and the tokenizer alone, one after the other.",
            "",
            "| tokenizer | prepare | prepare a thread | tokenizer alone | alone a thread | threads | overhead "
            "| decoding once | overhead beyond decoding |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            *prepare_rows,
            "",
            "A fitted BPE's prepare fits it too, which encoding alone does not; beside it, `tokenizers`' own trainer "
            "on the same train documents in the same parts, then `encode_batch` (MB/s of the text encoded):",
            "",
            "| tokenizer | prepare | the library's fit and encoding | overhead |",
            "| --- | ---: | ---: | ---: |",
            *fit_rows,
            "",
            "`tinygpt-prepare` of each corpus (characters), in its own process:",
            "",
            "| corpus | wall time, s | peak RSS, MiB |",
            "| --- | ---: | ---: |",
            *(f"| {name} | {seconds:,.1f} | {rss:,.0f} |" for name, (seconds, rss) in prepares.items()),
            "",
            "## A run on a tiny and a large prepared corpus (1 step of `experiment=smoke`)",
            "",
            "| corpus | text | train tokens | wall time, s | peak RSS, MiB |",
            "| --- | ---: | ---: | ---: | ---: |",
            f"| tiny | {TINY_MIB} MiB | | {spread(walls['tiny'], '.1f')} | {spread(rsss['tiny'], ',.0f')} |",
            f"| large | {large_text / MIB:,.0f} MiB | {train_tokens:,} | {spread(walls['large'], '.1f')} "
            f"| {spread(rsss['large'], ',.0f')} |",
            f"| {LARGE_DEV} | {large_text / MIB:,.0f} MiB | | {spread(walls[LARGE_DEV], '.1f')} "
            f"| {spread(rsss[LARGE_DEV], ',.0f')} |",
            "",
            f"The {LARGE_DEV} run scores four batches of its dev split at its one step "
            "(`+trainer.limit_val_batches=4`); the others have none.",
            "",
            "## The loader (`RandomWindows`, batch 64 × 256, one thread, the large corpus's train split)",
            "",
            f"M tokens a second of the training loop's time, median (lowest–highest) of {args.repeats} rounds, each "
            "round over windows no round drew before. From disk: the file's pages dropped from the page cache first. "
            "Indexing the map: the same windows gathered from the memory map, as before the reads. A step between "
            f"batches: {STEP_SECONDS * 1e3:g} ms of busy waiting after each batch, standing for the model's step "
            "(64 × 256 tokens at the 1 M tokens/s of a GPT-2 124M on an H100).",
            "",
            "| reading | M tokens/s |",
            "| --- | ---: |",
            *(f"| {case} | {spread([v / 1e6 for v in loader[case]], ',.1f')} |" for case in LOADER_CASES),
            "",
            *checks,
            "",
        ]
    )
    publish(doc, checks, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
