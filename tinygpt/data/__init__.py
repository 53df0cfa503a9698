"""Corpora, splits, tokenizers and batches for tinygpt (see docs/data.md)."""

from tinygpt.data.batches import RandomWindows, TrainBatches, generator_for_step
from tinygpt.data.config import DataConfig, TokenizerConfig, parse_fraction
from tinygpt.data.datamodule import TextDataModule, build_datamodule
from tinygpt.data.encoded import EncodedText
from tinygpt.data.errors import DataError
from tinygpt.data.tokenizers import (
    ByteLevelBPETokenizer,
    BytesTokenizer,
    CharTokenizer,
    Tokenizer,
    build_tokenizer,
    load_tokenizer,
    tokenizer_from_json,
)

__all__ = [
    "ByteLevelBPETokenizer",
    "BytesTokenizer",
    "CharTokenizer",
    "DataConfig",
    "DataError",
    "EncodedText",
    "RandomWindows",
    "TextDataModule",
    "TokenizerConfig",
    "Tokenizer",
    "TrainBatches",
    "build_datamodule",
    "build_tokenizer",
    "generator_for_step",
    "load_tokenizer",
    "parse_fraction",
    "tokenizer_from_json",
]
