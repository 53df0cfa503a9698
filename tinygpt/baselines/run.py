"""All the baselines over one data config and split, their record, and the held-out log.

`run_baselines` scores bz2, lzma, zlib, Kneser–Ney, unigram and (given a trained `model=lstm` run) the LSTM on
the dev split or, only when split="test" is asked for explicitly, the held-out split, and writes
<out_dir>/baselines_<split>.json, which scripts/analyze.py's comparison table reads. Every held-out scoring is
appended to <out_dir>/evaluations.jsonl, and the LSTM's also to its own run's evaluations.jsonl, as
scripts/evaluate.py does for a GPT.
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np

from tinygpt.baselines.compressors import COMPRESSORS, score_compressor
from tinygpt.baselines.kneser_ney import KneserNey
from tinygpt.baselines.texts import SplitText, load_split_text, plan_for
from tinygpt.baselines.unigram import Unigram
from tinygpt.common.errors import ConfigError, PathError
from tinygpt.common.files import write_json_atomic
from tinygpt.common.run_folder import (
    BITS_PER_BYTE,
    append_evaluations,
    checkpoint_files,
    checkpoints_dir,
    config_record,
    read_record,
)
from tinygpt.common.typed import typed
from tinygpt.data.config import DataConfig, text_settings
from tinygpt.data.corpus import recorded_data
from tinygpt.data.encoded import encode_segments
from tinygpt.data.errors import DataError
from tinygpt.metrics.costs import carried_state_bits
from tinygpt.train.checkpoints import load_model
from tinygpt.train.score_once import check_request, held_out_scoring, record_scoring

LSTM_CONTEXT = "state carried through the whole scored text, fed 128 tokens at a time (as 003's LSTM)"


def record_path(out_dir: str | Path, split: str) -> Path:
    return Path(out_dir) / f"baselines_{split}.json"


def summarize(
    bits: np.ndarray,
    token_bytes: np.ndarray,
    token_doc: np.ndarray,
    documents,
    unseen: np.ndarray | None,
    seconds: float,
) -> dict:
    """Totals over the scored tokens (all but the first), per document, and the cost of unseen characters
    (None when the tokens are not characters, so that cost cannot be told apart)."""
    scored = np.ones(len(bits), dtype=bool)
    scored[0] = False
    n_docs = len(documents)
    doc_bits = np.bincount(token_doc[scored], weights=bits[scored], minlength=n_docs)
    doc_bytes = np.bincount(token_doc[scored], weights=token_bytes[scored], minlength=n_docs)
    total_bits, total_bytes = float(bits[scored].sum()), int(token_bytes[scored].sum())
    return {
        "bits": total_bits,
        "bytes": total_bytes,
        "bits_per_byte": total_bits / total_bytes,
        "per_document_bpb": {
            name: float(b / n) for name, b, n in zip(documents, doc_bits, doc_bytes, strict=True) if n > 0
        },
        "unseen_bits": None if unseen is None else float(bits[scored & unseen].sum()),
        "seconds": round(seconds, 2),
    }


def char_arrays(split: SplitText) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per character of the scored text: bytes, document index, and whether training never had it."""
    known = set(split.train)
    unseen = np.fromiter((ch not in known for ch in split.text), dtype=bool, count=len(split.text))
    return split.char_bytes, split.doc_of_char, unseen


def run_baselines(
    data: Any,
    split: str = "dev",
    kn_order: int = 6,
    lstm_run: str | None = None,
    out_dir: str | Path = "outputs/baselines",
    device: str = "cpu",
    force: bool = False,
    reason: str | None = None,
    echo=print,
) -> dict:
    check_request(split, force, reason)
    if (force or reason) and not lstm_run:
        raise ConfigError("force= and reason= apply to the LSTM line only (lstm_run=): the compressors have no ledger")
    text = load_split_text(data, split)
    lstm = _lstm_checkpoint(lstm_run, data) if lstm_run else None  # checked before anything is scored
    with ExitStack() as stack:
        if lstm is not None and split == "test":
            # the LSTM line is a held-out scoring of that run's checkpoint: score once, checked before anything
            plan = stack.enter_context(held_out_scoring(Path(lstm_run), [lstm], force, reason, echo=echo))[0]
            lstm = Path(plan["checkpoint"])
        else:
            plan = None
        out_dir = Path(out_dir)
        char_bytes, doc_of_char, unseen = char_arrays(text)
        documents = [text.document_text(i) for i in range(len(text.documents))]
        results: dict[str, dict] = {}

        def report(name: str, result: dict) -> None:
            results[name] = result
            echo(f"{name}: {result['bits_per_byte']:.3f} bits per byte")

        for name in COMPRESSORS:
            t0 = time.perf_counter()
            r = score_compressor(name, text.train, text.text, documents)
            per_doc = {d: p["bits"] / p["bytes"] for d, p in zip(text.documents, r["per_document"], strict=True)}
            report(
                name,
                {
                    "bits": r["bits"],
                    "bytes": r["bytes"],
                    "bits_per_byte": r["bits"] / r["bytes"],
                    "per_document_bpb": per_doc,
                    "seconds": round(time.perf_counter() - t0, 2),
                    "given": "the training text (per document: 003's formula over the whole document)",
                },
            )
        for build in (lambda: KneserNey(text.train, kn_order), lambda: Unigram(text.train)):
            t0 = time.perf_counter()  # fitting included
            model = build()
            bits = model.bits_each(text.text)
            report(
                model.name, summarize(bits, char_bytes, doc_of_char, text.documents, unseen, time.perf_counter() - t0)
            )
        if lstm is not None:
            report("lstm", _score_lstm(lstm, text, device))

        record = {
            "split": split,
            "data": config_record(data),
            "documents": list(text.documents),
            "train_chars": len(text.train),
            "scored_chars": len(text.text) - 1,
            "scored_bytes": text.scored_bytes,
            "unseen_chars": int(unseen[1:].sum()),
            "kn_order": kn_order,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "baselines": results,
        }
        out_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(record_path(out_dir, split), record)
        if split == "test":
            append_evaluations(
                out_dir,
                [
                    {
                        "baseline": name,
                        "split": split,
                        BITS_PER_BYTE: r["bits_per_byte"],
                        "bits": r["bits"],
                        "bytes": r["bytes"],
                        "per_document_bpb": r["per_document_bpb"],
                    }
                    for name, r in results.items()
                ],
                stamp=record["time"],
            )
            if lstm is not None:
                r = results["lstm"]
                record_scoring(
                    Path(lstm_run),
                    {  # as evaluate.py logs a run's scoring (and lists it in run.json)
                        "checkpoint": r["checkpoint"],
                        "step": r["step"],
                        "split": split,
                        "context": LSTM_CONTEXT,
                        "weights_sha256": plan["weights_sha256"],
                        "forced": bool(force),
                        "reason": reason if force else None,
                        BITS_PER_BYTE: r["bits_per_byte"],
                        "bits": r["bits"],
                        "bytes": r["bytes"],
                        "per_document_bpb": r["per_document_bpb"],
                        "source": "baselines",
                    },
                    stamp=record["time"],
                )
        echo(
            f"[tinygpt] {split} baselines over {len(text.text) - 1:,} scored characters "
            f"({text.scored_bytes:,} bytes, {record['unseen_chars']:,} never seen in training): "
            f"{record_path(out_dir, split)}"
        )
        return record


def same_text(a: Any, b: Any) -> bool:
    """Whether two data configs give the baselines the same texts (tinygpt/data/config.py's ``text_settings``: the
    baselines read characters of a split cut at character positions, data.split_unit=chars, which plan_for
    requires)."""
    return text_settings(typed(DataConfig, a, "data", DataError)) == text_settings(
        typed(DataConfig, b, "data", DataError)
    )


def cached_baselines(data: Any, split: str, out_dir: str | Path, kn_order: int = 6, echo=print) -> dict:
    """The baselines of ``data``'s split, computed once into ``out_dir`` (baselines_<split>.json) and read back
    after: a sweep's report asks for them every time it is written, and the held-out text of the compressors,
    Kneser-Ney and the unigram is then scored (and logged in out_dir's evaluations.jsonl) once. A record of
    other data or another Kneser-Ney order is refused rather than overwritten."""
    path = record_path(out_dir, split)
    if path.exists():
        record = json.loads(path.read_text())
        if not same_text(record["data"], data) or record.get("kn_order") != kn_order:
            raise ConfigError(
                f"{path} holds the baselines of other data (data.name={record['data'].get('name')!r}, kn_order="
                f"{record.get('kn_order')}) than these runs'; move it away to compute them for these runs"
            )
        return record
    return run_baselines(data, split, kn_order=kn_order, out_dir=out_dir, echo=echo)


def _lstm_checkpoint(run_dir: str, data: Any) -> Path:
    """The LSTM run's newest checkpoint, after checking that it was trained on these very splits."""
    run_dir = Path(run_dir)
    record = read_record(run_dir)
    if record is None:
        raise PathError(f"lstm_run={run_dir}: no run.json there; give the folder of a model=lstm run")
    if record["config"]["model"].get("family") != "lstm":
        raise ConfigError(
            f"lstm_run={run_dir} is a {record['config']['model'].get('family', 'gpt')} run, not model=lstm"
        )
    _, ours = plan_for(data)
    _, theirs = plan_for(recorded_data(record))  # a relative data.path: where the run found its corpus
    if (ours.train, ours.dev, ours.test) != (theirs.train, theirs.dev, theirs.test):
        raise DataError(
            f"lstm_run={run_dir} was trained on other splits (data={record['config']['data']['name']}"
            f", dev={record['config']['data']['dev']}) than data={_data_name(data)} gives; "
            "score it with the data settings it was trained with"
        )
    checkpoints = checkpoint_files(run_dir)
    if not checkpoints:
        raise PathError(f"lstm_run={run_dir}: no checkpoints under {checkpoints_dir(run_dir)}")
    return checkpoints[-1]


def _data_name(data: Any) -> str:
    return str(data["name"]) if hasattr(data, "__getitem__") else str(data)


def _score_lstm(path: Path, text: SplitText, device: str) -> dict:
    t0 = time.perf_counter()
    model, tokenizer, checkpoint = load_model(path)
    if getattr(model.config, "family", "gpt") != "lstm":
        raise ConfigError(f"{path} is not an LSTM checkpoint")
    segments = [(name, text.document_text(i)) for i, name in enumerate(text.documents)]
    encoded = encode_segments(tokenizer, segments)
    bits = carried_state_bits(model.to(device), encoded.ids, chunk=128, device=device)
    known = set(text.train)
    unseen = None
    if tokenizer.name == "char":
        unseen = np.fromiter((ch not in known for ch in text.text), dtype=bool, count=len(text.text))
    result = summarize(
        bits,
        encoded.token_bytes.numpy(),
        encoded.token_doc.numpy(),
        encoded.documents,
        unseen,
        time.perf_counter() - t0,
    )
    return {**result, "checkpoint": str(path), "step": checkpoint.get("global_step"), "context": LSTM_CONTEXT}
