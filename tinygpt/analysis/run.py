"""scripts/analyze.py's work: the comparison table, repeats and memorization of a trained run, as a report
written beside the run (<run_dir>/analysis_<split>.md and .json).

The split is rebuilt from the run's own record, as scripts/evaluate.py does; the baselines come from the
record scripts/baselines.py wrote for the same data and split, checked to describe the same splits. Held-out
(split=test) analysis is only run when asked, and each checkpoint's held-out score is appended to the run's
evaluations.jsonl like every other held-out scoring.
"""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import torch

from tinygpt.analysis.comparison import BASELINE_ORDER, format_table, gpt_row
from tinygpt.analysis.memorization import longest_match
from tinygpt.analysis.repeats import copied_mask, repeats_table
from tinygpt.baselines.run import char_arrays, record_path
from tinygpt.baselines.texts import load_split_text, plan_for
from tinygpt.common.errors import PathError
from tinygpt.common.files import write_json_atomic
from tinygpt.common.run_folder import (
    BITS_PER_BYTE,
    checkpoint_files,
    checkpoints_dir,
    read_record,
)
from tinygpt.common.run_folder import record_path as run_record_path
from tinygpt.data.corpus import recorded_data
from tinygpt.data.errors import DataError
from tinygpt.model import generate
from tinygpt.train.checkpoints import load_model
from tinygpt.train.score_once import check_request, held_out_scoring, record_scoring


def analyze(
    run_dir: str | Path,
    split: str = "dev",
    baselines: str | Path | None = None,
    samples: int = 10,
    seed: int = 0,
    temperature: float = 0.8,
    prompt: str | None = None,
    greedy_prompt: str | None = None,
    sample_chars: int = 200,
    spans=(32, 16),
    device: str = "cpu",
    force: bool = False,
    reason: str | None = None,
    echo=print,
) -> dict:
    check_request(split, force, reason, what="analysed")
    run_dir = Path(run_dir)
    record = read_record(run_dir)
    if record is None:
        raise PathError(
            f"{run_record_path(run_dir)} not found: analyze needs the run's record to rebuild its data splits"
        )
    data = recorded_data(record)  # a relative data.path: where the run found its corpus
    checkpoints = checkpoint_files(run_dir)
    if not checkpoints:
        raise PathError(f"no checkpoints under {checkpoints_dir(run_dir)}")
    baselines_file = record_path(baselines or Path("outputs/baselines") / data["name"], split)
    base = _read_baselines(baselines_file, data)  # checked before anything is scored
    text = load_split_text(data, split)
    _, _, unseen = char_arrays(text)
    n_unseen = int(unseen[1:].sum())

    with ExitStack() as stack:
        hashes = None
        if split == "test":  # score once: the ledger and the pre-registered steps are checked before any scoring
            plans = stack.enter_context(
                held_out_scoring(run_dir, checkpoints, force, reason, registered_only=True, echo=echo)
            )
            checkpoints = [Path(plan["checkpoint"]) for plan in plans]
            hashes = {plan["checkpoint"]: plan["weights_sha256"] for plan in plans}
        rows, (last_bits, last_token_chars, last_model, last_tokenizer) = _score_checkpoints(
            run_dir, checkpoints, text, unseen, hashes, device, force, reason, echo
        )
    for prefix in BASELINE_ORDER:
        for name, r in (base or {}).get("baselines", {}).items():
            if name.startswith(prefix):
                rows[name] = r

    report = {
        "run_dir": str(run_dir),
        "split": split,
        "documents": list(text.documents),
        "scored_chars": len(text.text) - 1,
        "unseen_chars": n_unseen,
        "table": rows,
        "baselines_record": str(baselines_file) if base else None,
    }
    lines = [
        f"# Analysis of {run_dir} on the {split} split",
        "",
        f"{len(text.text) - 1:,} scored characters ({text.scored_bytes:,} bytes) in {len(text.documents)} "
        f"document(s). Bits per byte; lower is better.",
        "",
        "## Comparison",
        "",
        format_table(rows, list(text.documents)),
        "",
    ]
    if base is None:
        lines += [
            f"No baselines record at {baselines_file}: run `tinygpt-baselines data={data['name']} "
            f"split={split}` with the run's data settings for the baseline rows.",
            "",
        ]
    lines += [_unseen_line(rows, n_unseen, text.scored_bytes), ""]

    T = last_model.config.context_length
    table = repeats_table(text.text, text.train, last_bits, T, spans, last_token_chars)
    dev = text if split == "dev" else (load_split_text(data, "dev") if data.get("dev") != "none" else None)
    dev_copied = None if dev is None else float(copied_mask(dev.text, dev.train, spans[0])[1:].mean())
    report["repeats"] = {"rows": table, "dev_copied_fraction": dev_copied, "span_for_dev": spans[0]}
    unit = "characters" if last_tokenizer.name == "char" else f"{last_tokenizer.name} tokens"
    lines += [
        "## Repeats",
        "",
        f"the model's context T = {T} {unit}; the last checkpoint's cost, bits per character"
        + ("" if last_tokenizer.name == "char" else " of the tokens wholly inside each class (mixed: across an edge)")
        + ":",
        "",
    ]
    for r in table:
        parts = [
            f"{name} {r[name]['fraction']:5.1%}"
            + ("" if r[name]["mean_bits"] is None else f" at {r[name]['mean_bits']:.2f} bits")
            for name in ("copied", "repeated", "rest", "mixed")
            if name != "mixed" or r[name]["chars"]
        ]
        both = r["both"]["fraction"]
        overlap = f" ({both:.1%} both copied and repeated, so these sum past 100%)" if r["both"]["chars"] else ""
        lines.append(f"- stretches of {r['span']}+ characters: " + ", ".join(parts) + overlap)
    if dev_copied is not None:
        lines.append(f"- for comparison, the dev slice: {dev_copied:.1%} copied from the training text ({spans[0]}+)")
    lines.append("")

    mem = memorization(
        last_model,
        last_tokenizer,
        text,
        samples,
        seed,
        temperature,
        prompt or record["config"].get("sample", {}).get("prompt") or text.train[:20],
        greedy_prompt or text.train[:40],
        sample_chars,
    )
    report["memorization"] = mem
    lines += [
        "## Memorization",
        "",
        f"{samples} samples of {sample_chars} tokens (seed {seed}, temperature "
        f"{temperature}) from the last checkpoint; longest stretch also in the training text, and where:",
        "",
    ]
    for m in mem["samples"] + [mem["greedy"]] + mem["held_out"]:
        lines.append(
            f"- {m['what']}: {m['length']} characters {json.dumps(m['stretch'])}"
            + (f" ({m['train_document']} at character {m['train_offset']:,})" if m["length"] else "")
        )
    lengths = [m["length"] for m in mem["samples"]]
    held = [m["length"] for m in mem["held_out"]]
    lines += [
        "",
        f"samples: {min(lengths)} to {max(lengths)} characters; greedy: {mem['greedy']['length']}; "
        f"pieces of the {split} text, written by people: {min(held)} to {max(held)}",
        "",
    ]

    write_json_atomic(run_dir / f"analysis_{split}.json", report)
    (run_dir / f"analysis_{split}.md").write_text("\n".join(lines))
    echo(f"[tinygpt] report: {run_dir / f'analysis_{split}.md'}")
    return report


def memorization(
    model,
    tokenizer,
    text,
    samples: int,
    seed: int,
    temperature: float,
    prompt: str,
    greedy_prompt: str,
    sample_chars: int,
) -> dict:
    def where(match) -> dict:
        doc, offset = text.train_location(match.train_offset) if match.length else (None, -1)
        return {"length": match.length, "stretch": match.text, "train_document": doc, "train_offset": offset}

    T = model.config.context_length
    out = {"samples": [], "greedy": None, "held_out": []}
    generator = torch.Generator().manual_seed(seed)
    for i, (p, greedy) in enumerate([(prompt, False)] * samples + [(greedy_prompt, True)]):
        ids = (tokenizer.encode(p) or [0])[-(T // 2) :]
        new = max(1, min(sample_chars, T - len(ids)))
        tokens = generate(model, torch.tensor([ids]), new, temperature=temperature, greedy=greedy, generator=generator)
        written = tokenizer.decode(tokens[0, len(ids) :].tolist())
        entry = {
            "what": f"greedy from {json.dumps(p[:30])}" if greedy else f"sample {i}",
            "text": written,
            **where(longest_match(written, text.train)),
        }
        if greedy:
            out["greedy"] = entry
        else:
            out["samples"].append(entry)
    n = len(text.text)
    for k in range(3):
        start = (k + 1) * n // 4
        piece = text.text[start : start + sample_chars]
        out["held_out"].append(
            {
                "what": f"{text.split} text from character {start:,}",
                "text": piece,
                **where(longest_match(piece, text.train)),
            }
        )
    return out


def _unseen_line(rows: dict, n_unseen: int, scored_bytes: int) -> str:
    if n_unseen == 0:
        return "Every scored character occurs in the training text."
    parts = [
        f"{name} pays {r['unseen_bits'] / n_unseen:.1f} bits per unseen character, "
        f"{r['unseen_bits'] / scored_bytes:.3f} bits per byte of the text in all "
        f"({r['unseen_bits'] / r['bits']:.1%} of its cost)"
        for name, r in rows.items()
        if r.get("unseen_bits") is not None
    ]
    head = f"{n_unseen:,} scored characters never occur in the training text."
    if not parts:
        # A BPE model's token spans several characters, so no row can say what the unseen ones alone cost.
        return head + " No row here scores one character at a time, so their cost is not separated."
    return f"{head} " + "; ".join(parts) + "."


def _read_baselines(path: Path, data: dict) -> dict | None:
    if not path.exists():
        return None
    base = json.loads(path.read_text())
    _, ours = plan_for(data)
    _, theirs = plan_for(base["data"])
    if (ours.train, ours.dev, ours.test) != (theirs.train, theirs.dev, theirs.test):
        raise DataError(
            f"{path} scores other splits than this run's data config ({data['name']}, dev="
            f"{data['dev']}); rerun tinygpt-baselines with the run's data settings or give "
            "baselines=<its out_dir>"
        )
    return base


def _score_checkpoints(run_dir, checkpoints, text, unseen, hashes, device, force, reason, echo):
    """The GPT rows of the comparison table, one per distinct checkpoint, and the last one's per-token bits, the
    characters that start in each token, model and tokenizer. ``hashes`` (held-out split only: each planned
    checkpoint's weights hash): each scoring is logged as evaluate.py logs its own (evaluations.jsonl, and listed
    in run.json for the report)."""
    split = "dev" if hashes is None else "test"
    rows: dict[str, dict] = {}
    last, steps_done = (None, None, None, None), set()
    for path in checkpoints:
        model, tokenizer, checkpoint = load_model(path)
        step = checkpoint.get("global_step")
        if step in steps_done:  # last.ckpt at a kept step: the same weights
            continue
        steps_done.add(step)
        row, bits, token_chars = gpt_row(model, tokenizer, text, unseen, device=device)
        rows[f"GPT, {step:,} steps"] = row
        echo(f"GPT, {step:,} steps: {row['bits_per_byte']:.3f} bits per byte ({split})")
        last = (bits, token_chars, model, tokenizer)
        if split == "test":
            record_scoring(
                run_dir,
                {
                    "checkpoint": str(path),
                    "step": step,
                    "split": split,
                    "weights_sha256": hashes[str(path)],
                    "forced": bool(force),
                    "reason": reason if force else None,
                    "source": "analyze",
                    **{k: row[k] for k in ("bits", "bytes", BITS_PER_BYTE, "per_document_bpb")},
                },
            )
    return rows, last
