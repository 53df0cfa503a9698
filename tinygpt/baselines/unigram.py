"""The unigram model: character frequencies of the training text, the floor a collapsed model sits on (003).

A model that ignores its input can do no better than the training text's character frequencies; 003's
collapsed runs scored at this level. As a baseline on new text it needs a rule for characters never seen in
training: add-one (Laplace) counts over the char tokenizer's vocabulary, the training characters plus one
unseen symbol shared by every new character, so every scored character has a finite cost.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from tinygpt.common.errors import ConfigError


class Unigram:
    name = "unigram"

    def __init__(self, train: str):
        if not train:
            raise ConfigError("Unigram: the training text is empty")
        self.counts = Counter(train)
        self.vocab_size = len(self.counts) + 1  # + the unseen symbol
        self.total = len(train) + self.vocab_size  # add-one over the vocabulary

    def prob(self, char: str) -> float:
        return (self.counts.get(char, 0) + 1) / self.total

    def bits_each(self, text: str) -> np.ndarray:
        """Bits for every character; position 0 is not scored (0), as the GPT's first token."""
        bits = np.array([-math.log2(self.prob(ch)) for ch in text], dtype=np.float64)
        if len(bits):
            bits[0] = 0.0
        return bits
