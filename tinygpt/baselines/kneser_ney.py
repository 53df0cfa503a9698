"""Interpolated Kneser–Ney character n-gram model, fitted on the training text only (003's "6 characters").

`order` is the number of preceding characters the model conditions on, as in 003's kn.py, which scores
character i from text[i-6:i]; the longest n-grams counted are order + 1 characters long. Interpolated Kneser–Ney
(Chen and Goodman, 1998), with one absolute discount D per n-gram length, D = n1 / (n1 + 2·n2) from that
length's counts of counts:

    P_k(w | h) = max(c_k(hw) − D_k, 0) / c_k(h·) + D_k · N1+(h·) / c_k(h·) · P_{k−1}(w | h minus its first char)

where c_k is the raw count for the longest n-grams and, below them, the continuation count N1+(·hw), the
number of distinct characters seen before hw. A context never seen at some length adds nothing there: the
estimate of the shorter context is kept. The lowest level interpolates with the uniform distribution.

Unseen characters: the vocabulary is the training text's characters plus one "unseen" symbol that stands for
every character never seen in training, exactly the char tokenizer's id 0. The unseen symbol has no counts, so
it gets only the uniform share that the discounts pass down, and the probabilities over the vocabulary sum to
1 for every context (tests/test_baselines_kneser_ney.py checks it).

Counts live in dicts keyed by strings: building the tables is a few passes of C-speed slicing and counting,
and scoring is at most order + 1 dict look-ups per character, so a few MB of text takes seconds to a minute.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from tinygpt.common.errors import ConfigError


class KneserNey:
    def __init__(self, train: str, order: int = 6):
        if isinstance(order, bool) or not isinstance(order, int) or order < 0:
            raise ConfigError(f"kn_order={order!r} is not allowed: must be an integer >= 0 (characters of context)")
        if not train:
            raise ConfigError("KneserNey: the training text is empty")
        self.order = order
        self.vocabulary = sorted(set(train))
        self._known = set(self.vocabulary)
        self.vocab_size = len(self.vocabulary) + 1  # + the unseen symbol
        n = order + 1
        # counts[k]: n-gram of length k -> raw count (k = n) or continuation count (k < n)
        counts: dict[int, Counter] = {n: Counter(train[i : i + n] for i in range(len(train) - n + 1))}
        distinct = set(counts[n])
        for k in range(n - 1, 0, -1):
            counts[k] = Counter(gram[1:] for gram in distinct)
            distinct = set(counts[k])
            distinct.add(train[:k])  # the text's first k characters have no character before them
        self.counts = counts
        self.context_total: dict[int, dict[str, int]] = {}
        self.context_types: dict[int, dict[str, int]] = {}
        self.discount: dict[int, float] = {}
        for k, table in counts.items():
            total: dict[str, int] = {}
            types: dict[str, int] = {}
            for gram, c in table.items():
                h = gram[:-1]
                total[h] = total.get(h, 0) + c
                types[h] = types.get(h, 0) + 1
            self.context_total[k], self.context_types[k] = total, types
            of = Counter(table.values())
            n1, n2 = of.get(1, 0), of.get(2, 0)
            self.discount[k] = n1 / (n1 + 2 * n2) if n1 + n2 > 0 else 0.5

    @property
    def name(self) -> str:
        return f"kneser-ney-{self.order}"

    def prob(self, history: str, char: str) -> float:
        """P(char | the last `order` characters of history); a character never seen in training is the unseen
        symbol (all of them share its probability, as they share the char tokenizer's id 0)."""
        h = history[-self.order :] if self.order else ""
        p = 1.0 / self.vocab_size
        known = char in self._known
        for k in range(1, len(h) + 2):
            ctx = h[len(h) - (k - 1) :] if k > 1 else ""
            total = self.context_total[k].get(ctx, 0)
            if total == 0:
                continue
            c = self.counts[k].get(ctx + char, 0) if known else 0
            d = self.discount[k]
            p = (max(c - d, 0.0) + d * self.context_types[k][ctx] * p) / total
        return p

    def distribution(self, history: str) -> dict[str, float]:
        """The probability of every vocabulary entry after `history`; the unseen symbol's key is None."""
        probs: dict = {ch: self.prob(history, ch) for ch in self.vocabulary}
        probs[None] = self.prob(history, _unseen_char(self._known))
        return probs

    def bits_each(self, text: str) -> np.ndarray:
        """Bits for every character of text given the characters before it in text; position 0 is not
        scored (0), as the GPT's first token."""
        bits = np.zeros(len(text), dtype=np.float64)
        log2 = math.log2
        for i in range(1, len(text)):
            bits[i] = -log2(self.prob(text[max(0, i - self.order) : i], text[i]))
        return bits


def _unseen_char(known: set[str]) -> str:
    code = 0xE000  # a private-use character outside the vocabulary
    while chr(code) in known:
        code += 1
    return chr(code)
