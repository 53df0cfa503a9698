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

A model with its own tokens (BPE) is scored per token, and the masks stay per character. Each class then holds
the tokens whose characters all lie in it (a token with no character of its own, one byte of a character that
a byte-level BPE split, goes with the token whose character it continues), and its cost is those tokens' bits
over their characters: bits per character, exactly, as for a character model. Tokens that straddle a class's
edge are counted apart, as "mixed". The window is the model's: T tokens, so a stretch is out of sight when its
first occurrence starts before the token T tokens back. With one token per character every rule here is the
character rule above.
"""

from __future__ import annotations

import numpy as np

from tinygpt.common.errors import ConfigError


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
        raise ConfigError(f"span={span} must be at least 1")
    grams = {train[i : i + span] for i in range(len(train) - span + 1)}
    starts = [i for i in range(len(text) - span + 1) if text[i : i + span] in grams]
    return _cover(starts, span, len(text))


def _chars_per_token(token_chars: np.ndarray | None, n: int) -> np.ndarray:
    """token_chars as an array, checked to cover the n characters of the text (one token per character when
    None)."""
    if token_chars is None:
        return np.ones(n, dtype=np.int64)
    chars = np.asarray(token_chars, dtype=np.int64)
    if int(chars.sum()) != n:
        raise ConfigError(f"token_chars sums to {int(chars.sum())} characters, the text has {n}")
    return chars


def window_starts(n: int, T: int, token_chars: np.ndarray | None = None) -> np.ndarray:
    """For every character, the first character the model still sees when it reaches it: the start of the token
    T tokens before the one the character starts in (-1 while fewer than T tokens precede it)."""
    chars = _chars_per_token(token_chars, n)
    starts = np.cumsum(chars) - chars  # the character each token starts at
    back = np.repeat(np.arange(len(chars)), chars) - T  # the token each character starts in, T back
    return np.where(back >= 0, starts[np.clip(back, 0, None)], -1)


def repeated_mask(text: str, span: int, T: int, token_chars: np.ndarray | None = None) -> np.ndarray:
    """T: the model's context in tokens; token_chars: the characters that start in each token (None: one token
    per character)."""
    if span < 1:
        raise ConfigError(f"span={span} must be at least 1")
    window = window_starts(len(text), T, token_chars)
    first_seen: dict[str, int] = {}
    starts = []
    for i in range(len(text) - span + 1):
        s = text[i : i + span]
        first = first_seen.setdefault(s, i)
        if first < window[i]:
            starts.append(i)
    return _cover(starts, span, len(text))


def repeats_table(
    text: str, train: str, bits: np.ndarray, T: int, spans=(32, 16), token_chars: np.ndarray | None = None
) -> list[dict]:
    """For each span: the share of scored characters copied / repeated / neither / mixed, and the mean bits per
    character on each; "both" is the part of copied that is also repeated (the two masks overlap, as 003's do).
    bits: the model's cost per token of text (the first token unscored); token_chars: the characters that start
    in each token (EncodedText.token_chars; None: one token per character)."""
    bits = np.asarray(bits, dtype=np.float64)
    chars = _chars_per_token(token_chars, len(text))
    if len(chars) != len(bits):
        raise ConfigError(f"{len(bits)} token costs for {len(chars)} tokens")
    # units: a token with characters of its own, with the tokens after it that only continue its last character
    unit_of_token = np.cumsum(chars > 0) - 1
    unit_chars = chars[chars > 0]
    unit_bits = np.bincount(unit_of_token, weights=bits, minlength=len(unit_chars))
    unit_start = np.cumsum(unit_chars) - unit_chars
    scored = np.ones(len(unit_chars), dtype=bool)
    scored[0] = False  # the first token has no context

    def share(mask: np.ndarray) -> np.ndarray:  # characters of each unit inside the mask
        return np.add.reduceat(mask.astype(np.int64), unit_start)

    rows = []
    for span in spans:
        copied_chars, repeated_chars = copied_mask(text, train, span), repeated_mask(text, span, T, chars)
        copied, repeated, either = share(copied_chars), share(repeated_chars), share(copied_chars | repeated_chars)
        classes = {
            "copied": scored & (copied == unit_chars),
            "repeated": scored & (repeated == unit_chars),
            "rest": scored & (either == 0),
        }
        classes["mixed"] = scored & ~(classes["copied"] | classes["repeated"] | classes["rest"])
        # 003's masks overlap: a stretch of the training text that the scored text repeats out of the window is
        # both. The classes then sum past 100%; this names by how much, so the shares are not read as a partition.
        classes["both"] = classes["copied"] & classes["repeated"]
        row = {"span": span, "T": T}
        total = int(unit_chars[scored].sum())
        for name, units in classes.items():
            k = int(unit_chars[units].sum())
            row[name] = {
                "fraction": k / total,
                "chars": k,
                "mean_bits": float(unit_bits[units].sum() / k) if k else None,
            }
        rows.append(row)
    return rows
