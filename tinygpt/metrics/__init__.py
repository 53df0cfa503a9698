"""Metrics: bits per byte over sliding windows, every scored token's cost, and the unigram entropy baseline."""

from tinygpt.metrics.bits_per_byte import BitsPerByte
from tinygpt.metrics.entropy import unigram_entropy_bits
from tinygpt.metrics.scoring import logits_of, score
from tinygpt.metrics.units import LN2

__all__ = [
    "LN2",
    "BitsPerByte",
    "logits_of",
    "score",
    "unigram_entropy_bits",
]
