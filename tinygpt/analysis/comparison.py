"""003's comparison table: every GPT checkpoint and every baseline, per scored document and in all.

Rows: the GPT at each kept checkpoint (its cost per token under the scoring windows), then the baselines from
scripts/baselines.py's record for the same data and split. Columns: bits per byte on each document of the
split, on all of it, and, for the GPT only, on a sample of the training text it learned from (the first
`train_sample_chars` characters of the train split; 003: 60,000), which shows how much closer it fits text it
has seen. Also the characters of the split never seen in training, and what each model pays for them.
"""

from __future__ import annotations

import numpy as np

from tinygpt.baselines.run import summarize
from tinygpt.baselines.texts import SplitText
from tinygpt.data.encoded import encode_segments
from tinygpt.metrics.costs import window_bits

BASELINE_ORDER = ("lstm", "kneser-ney", "bz2", "lzma", "zlib", "unigram")


def gpt_row(
    model, tokenizer, text: SplitText, unseen: np.ndarray, train_sample_chars: int = 60_000, device: str = "cpu"
) -> tuple[dict, np.ndarray, np.ndarray]:
    """(the row, the per-token bits on the split, the characters that start in each token) for one checkpoint."""
    T = model.config.context_length
    encoded = encode_segments(tokenizer, [(n, text.document_text(i)) for i, n in enumerate(text.documents)])
    bits = window_bits(model.to(device), encoded, T, device)
    token_unseen = unseen if tokenizer.name == "char" else None
    row = summarize(bits, encoded.token_bytes.numpy(), encoded.token_doc.numpy(), encoded.documents, token_unseen, 0.0)
    sample = text.train[:train_sample_chars]
    seen = encode_segments(tokenizer, [("train", sample)])
    if len(seen) > T:
        seen_bits = window_bits(model, seen, T, device)
        row["train_sample_bpb"] = float(seen_bits[1:].sum() / seen.token_bytes[1:].sum())
        row["train_sample_chars"] = len(sample)
    return row, bits, encoded.token_chars.numpy()


def format_table(rows: dict[str, dict], documents: list[str]) -> str:
    """A Markdown table: one row per model, one column per document, all, and the training sample."""
    header = ["bits per byte", *documents, "all", "training text (seen)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, row in rows.items():
        cells = [f"{row['per_document_bpb'][d]:.3f}" if d in row.get("per_document_bpb", {}) else "" for d in documents]
        seen = row.get("train_sample_bpb")
        cells += [f"{row['bits_per_byte']:.3f}", "" if seen is None else f"{seen:.3f}"]
        lines.append("| " + " | ".join([name, *cells]) + " |")
    return "\n".join(lines)
