"""The text every baseline is scored on: the same splits, documents, scored positions and bytes as the GPT.

The splits come from tinygpt.data's own plan (the same corpus, seed and split settings as a training run), so
a baseline and a GPT trained with the same `data` config see the same training text and the same dev or
held-out text. The held-out text is read only when split="test" is asked for, by the explicit command.

Scored positions: the GPT's scoring windows (tinygpt/data/windows.py) score every token of a split but the
first, across document boundaries, so a character model scores characters 1..n-1 of the concatenated split
and divides by their UTF-8 bytes. Character baselines here do the same; `scored_bytes` is that divisor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tinygpt.common.errors import ConfigError
from tinygpt.common.typed import typed
from tinygpt.data.config import DataConfig
from tinygpt.data.corpus import open_corpus
from tinygpt.data.documents import Piece, read_piece
from tinygpt.data.errors import DataError
from tinygpt.data.kinds import corpus_kind, plan_splits
from tinygpt.data.root import resolve_data_root
from tinygpt.data.splits import SplitPlan

SPLITS = ("dev", "test")


@dataclass(frozen=True)
class SplitText:
    split: str  # dev | test
    train: str  # the training text the GPT fits (the train split: the first data.fraction of fit_full)
    text: str  # the scored split, its documents concatenated in order, as the GPT's scoring sees it
    documents: tuple[str, ...]
    doc_starts: tuple[int, ...]  # character offset of each document in `text`
    train_documents: tuple[str, ...]
    train_doc_starts: tuple[int, ...]

    @property
    def doc_of_char(self) -> np.ndarray:
        """Document index of every character of `text`."""
        bounds = np.array(self.doc_starts[1:] + (len(self.text),), dtype=np.int64)
        return np.searchsorted(bounds, np.arange(len(self.text)), side="right")

    @property
    def char_bytes(self) -> np.ndarray:
        """UTF-8 bytes of every character of `text`."""
        return utf8_lengths(self.text)

    @property
    def scored_bytes(self) -> int:
        """The denominator of bits per byte: the bytes of every character but the first."""
        return len(self.text[1:].encode("utf-8"))

    def document_text(self, index: int) -> str:
        end = self.doc_starts[index + 1] if index + 1 < len(self.doc_starts) else len(self.text)
        return self.text[self.doc_starts[index] : end]

    def train_location(self, offset: int) -> tuple[str, int]:
        """(document, character offset in it) of a character offset in `train`."""
        i = int(np.searchsorted(np.array(self.train_doc_starts), offset, side="right")) - 1
        return self.train_documents[i], offset - self.train_doc_starts[i]


def utf8_lengths(text: str) -> np.ndarray:
    codepoints = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    return 1 + (codepoints >= 0x80) + (codepoints >= 0x800) + (codepoints >= 0x10000)


def plan_for(data: Any) -> tuple[DataConfig, SplitPlan]:
    config = typed(DataConfig, data, "data", DataError)
    if config.split_unit != "chars":
        raise DataError(
            f"data.split_unit={config.split_unit!r}: the baselines and analyses cut the text at "
            "character positions; use data.split_unit=chars"
        )
    if corpus_kind(config.corpus).stores_ids:
        raise DataError(
            f"data={config.name} holds GPT-2 ids, not text: the baselines and analyses read text; use a text corpus "
            "(data=textfile, textdir, jsonl, parquet or hf)"
        )
    return config, plan_splits(open_corpus(config, resolve_data_root(config.root)), config)


def load_split_text(data: Any, split: str = "dev") -> SplitText:
    """The training text and the scored split of a `data` config. split=test reads the held-out text."""
    if split not in SPLITS:
        raise ConfigError(f"split={split!r} is not allowed; choose dev or test")
    _, plan = plan_for(data)
    pieces = plan.dev if split == "dev" else plan.test
    if not pieces:
        what = "data.dev=none" if split == "dev" else "no held-out split (data.test_fraction=0 or data.test_k=0)"
        raise DataError(f"the {split} split of this data config is empty ({what}); choose the other split")
    train_documents, train_starts, train = _join(plan.train)
    documents, starts, text = _join(pieces)
    if len(text) < 2:
        raise DataError(f"the {split} split has {len(text)} characters; at least 2 are needed to score one")
    return SplitText(split, train, text, documents, starts, train_documents, train_starts)


def _join(pieces: tuple[Piece, ...]) -> tuple[tuple[str, ...], tuple[int, ...], str]:
    texts = [read_piece(piece) for piece in pieces]
    starts = np.cumsum([0] + [len(t) for t in texts[:-1]]).tolist()
    return tuple(p.document for p in pieces), tuple(int(s) for s in starts), "".join(texts)
