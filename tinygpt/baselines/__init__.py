"""Baselines on the GPT's scale: compressors given the training text, Kneser–Ney, unigram, the LSTM (003)."""

from tinygpt.baselines.compressors import COMPRESSORS, compressed_bits
from tinygpt.baselines.kneser_ney import KneserNey
from tinygpt.baselines.texts import SplitText, load_split_text
from tinygpt.baselines.unigram import Unigram

__all__ = ["COMPRESSORS", "KneserNey", "SplitText", "Unigram", "compressed_bits", "load_split_text"]
