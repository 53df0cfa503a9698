"""Repeats (003): how much of the scored text was copied from the training text, or repeats itself beyond the
model's window, and what the model pays on each.

- copied mask: every character inside a stretch of `span` characters that occurs verbatim in the training text;
- repeated mask: every character inside a stretch of `span` characters whose first occurrence in the scored
  text itself starts more than T characters earlier (T = the model's context), so the model cannot see it.

Both are 003's definitions (copied_mask / repeated_mask in its repeats.py), including their approximations:
every character of a matched stretch is marked, and a stretch counts as repeated when its first occurrence is
out of the window even if a later copy is inside it. The matching is linear in the text lengths: one hash set
of the training text's span-grams (or a dict of first occurrences) and one look-up per position, never a
substring search per position.
"""

from __future__ import annotations

import numpy as np


def _cover(starts: list[int], span: int, n: int) -> np.ndarray:
    """Boolean mask of the characters inside [s, s + span) for every s in starts."""
    edges = np.zeros(n + 1, dtype=np.int64)
    if starts:
        s = np.asarray(starts, dtype=np.int64)
        np.add.at(edges, s, 1)
        np.add.at(edges, s + span, -1)
    return np.cumsum(edges[:n]) > 0


def copied_mask(text: str, train: str, span: int) -> np.ndarray:
    if span < 1:
        raise ValueError(f"span={span} must be at least 1")
    grams = {train[i : i + span] for i in range(len(train) - span + 1)}
    starts = [i for i in range(len(text) - span + 1) if text[i : i + span] in grams]
    return _cover(starts, span, len(text))


def repeated_mask(text: str, span: int, T: int) -> np.ndarray:
    if span < 1:
        raise ValueError(f"span={span} must be at least 1")
    first_seen: dict[str, int] = {}
    starts = []
    for i in range(len(text) - span + 1):
        s = text[i : i + span]
        first = first_seen.setdefault(s, i)
        if first < i - T:
            starts.append(i)
    return _cover(starts, span, len(text))


def repeats_table(text: str, train: str, bits: np.ndarray, T: int, spans=(32, 16)) -> list[dict]:
    """For each span: the share of scored characters copied / repeated / neither, and the mean bits on each.
    bits: the model's cost per character of text (position 0 unscored)."""
    scored = np.ones(len(text), dtype=bool)
    scored[0] = False
    rows = []
    for span in spans:
        copied = copied_mask(text, train, span) & scored
        repeated = repeated_mask(text, span, T) & scored
        rest = scored & ~copied & ~repeated
        row = {"span": span, "T": T}
        for name, mask in (("copied", copied), ("repeated", repeated), ("rest", rest)):
            n = int(mask.sum())
            row[name] = {
                "fraction": n / int(scored.sum()),
                "chars": n,
                "mean_bits": float(bits[mask].mean()) if n else None,
            }
        rows.append(row)
    return rows
