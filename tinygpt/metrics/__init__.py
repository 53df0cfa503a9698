"""Metrics: bits per byte over sliding windows, and the unigram entropy baseline."""

from tinygpt.metrics.bits_per_byte import BitsPerByte
from tinygpt.metrics.entropy import unigram_entropy_bits
from tinygpt.metrics.scoring import logits_of, score
from tinygpt.metrics.windows import SlidingWindowDataset, sliding_windows

__all__ = [
    "BitsPerByte",
    "SlidingWindowDataset",
    "logits_of",
    "score",
    "sliding_windows",
    "unigram_entropy_bits",
]
