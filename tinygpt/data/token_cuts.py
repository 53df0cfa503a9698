"""split_unit=tokens (000's setup): the dev tail and the train fraction cut at token boundaries of the encoded rest,
streamed, so that a corpus of any size is cut in bounded memory.

Why a scratch file: the cuts are shares of the rest's tokens, known only once all of it is encoded. So the rest's
ids are written once, a chunk at a time as they are encoded, to a file of ids beside the prepared folders
(prepared.py's ``scratch``); the train split is then its first ids and the dev tail its last, read back a block at a
time. Each token's bytes and characters are looked up in the tokenizer's per-id tables (split_unit=tokens takes a
tokenizer fixed in advance, bytes or gpt2, whose every id always covers the same bytes), and each token's document
follows from where each document's ids begin. Nothing is encoded twice and memory holds a chunk or a block, not the
rest's text or 32 bytes a token of it. The ids are those of encoding each document whole (the chunks are cut where
no token crosses: tinygpt/data/documents.py's ``read_chunks``), and the cuts fall where slicing the whole encoding
put them, so 000's committed results reproduce.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from tinygpt.data.encoded import EncodedText, TrainChunk, encode_train_chunks
from tinygpt.data.store import append_values, ids_dtype, scratch
from tinygpt.data.tokenizers import Tokenizer

BLOCK = 1 << 22  # ids a block as the train split and the dev tail are read back from the scratch file


@dataclass(frozen=True)
class TokenCut:
    """The rest cut at token boundaries: the train split's chunks, the dev tail's (None without one), and the
    characters and bytes of fit_full (the rest without its dev tail), which a run reports."""

    train: Iterator[TrainChunk]
    dev: Iterator[EncodedText] | None
    fit_full_chars: int
    fit_full_bytes: int


def cut_by_tokens(
    tokenizer: Tokenizer,
    chunks: Iterable[tuple[str, str]],
    dev_fraction: float | None,
    fraction: float,
    processes: int = 1,
) -> TokenCut:
    """The rest's (document, text) chunks encoded once into a scratch file of ids and cut: dev = its last
    ``dev_fraction`` of tokens (None: no dev tail), fit_full = the tokens before, train = the first ``fraction`` of
    fit_full's tokens. The scratch file is removed as soon as it is written and opened, so only the cut's chunks can
    read it (through the open file)."""
    token_bytes, token_chars = tokenizer.token_lengths()
    dtype = ids_dtype(tokenizer.vocab_size)
    names: list[str] = []  # each document of the rest, in order ...
    starts: list[int] = []  # ... and the index of its first id
    n = 0
    with scratch("cut") as folder:
        path = folder / "rest.ids"
        path.touch()
        for chunk in encode_train_chunks(tokenizer, chunks, processes):
            if not names or names[-1] != chunk.documents[0]:  # a long document comes in several chunks
                names.append(chunk.documents[0])
                starts.append(n)
            append_values(path, chunk.ids, dtype)
            n += len(chunk)
        ids = _Ids(os.open(path, os.O_RDONLY), dtype)  # still readable once the folder is removed
    n_fit = int(n * (1 - dev_fraction)) if dev_fraction is not None else n
    n_train = int(n_fit * fraction)
    fit_bytes, fit_chars = _counts(ids, 0, n_fit, token_bytes, token_chars)
    layout = _Documents(names, starts)
    train = _train_chunks(ids, n_train, token_bytes, token_chars, layout)
    dev = None if dev_fraction is None else _dev_blocks(ids, n_fit, n, token_bytes, token_chars, layout)
    return TokenCut(train, dev, fit_chars, fit_bytes)


class _Ids:
    """The scratch file's ids, read a block at a time with ``os.pread`` into memory the block owns: a memory map
    read to its end would keep every page it touched in the process's resident set (docs/benchmarks/data.md),
    though the kernel could drop them. Closed with the last reader."""

    def __init__(self, fd: int, dtype: np.dtype):
        self.fd, self.dtype = fd, dtype

    def __getitem__(self, span: slice) -> np.ndarray:
        size = self.dtype.itemsize
        data = os.pread(self.fd, (span.stop - span.start) * size, span.start * size)
        return np.frombuffer(data, dtype=self.dtype)

    def __del__(self) -> None:
        os.close(self.fd)


@dataclass(frozen=True)
class _Documents:
    names: list[str]
    starts: list[int]

    def of(self, token: int) -> int:
        """The document token ``token`` belongs to: the last one that starts at or before it (a document with no
        tokens starts where the next one does, and holds none)."""
        return bisect.bisect_right(self.starts, token) - 1

    def between(self, start: int, stop: int) -> tuple[int, int]:
        """The first and last documents of tokens [start, stop) (stop > start)."""
        return self.of(start), self.of(stop - 1)


def _counts(
    ids: _Ids | np.ndarray, start: int, stop: int, token_bytes: np.ndarray, token_chars: np.ndarray
) -> tuple[int, int]:
    n_bytes = n_chars = 0
    for begin in range(start, stop, BLOCK):
        block = np.asarray(ids[begin : min(stop, begin + BLOCK)], dtype=np.int64)
        n_bytes += int(token_bytes[block].sum())
        n_chars += int(token_chars[block].sum())
    return n_bytes, n_chars


def _train_chunks(
    ids: _Ids, stop: int, token_bytes: np.ndarray, token_chars: np.ndarray, layout: _Documents
) -> Iterator[TrainChunk]:
    for begin in range(0, stop, BLOCK):
        end = min(stop, begin + BLOCK)
        block = np.asarray(ids[begin:end])
        n_bytes, n_chars = _counts(block, 0, block.size, token_bytes, token_chars)
        first, last = layout.between(begin, end)
        yield TrainChunk(block, n_chars, n_bytes, tuple(layout.names[first : last + 1]))


def _dev_blocks(
    ids: _Ids, start: int, stop: int, token_bytes: np.ndarray, token_chars: np.ndarray, layout: _Documents
) -> Iterator[EncodedText]:
    """The dev tail a block at a time, as a scored split is written (prepared.py's ``_write_arrays``): a block's
    documents from the one its first token is in, each token's document counted from there."""
    for begin in range(start, stop, BLOCK):
        end = min(stop, begin + BLOCK)
        block = np.asarray(ids[begin:end], dtype=np.int64)
        first, last = layout.between(begin, end)
        boundaries = np.asarray(layout.starts[first + 1 : last + 1], dtype=np.int64)
        doc = np.searchsorted(boundaries, np.arange(begin, end), side="right").astype(np.int32)
        arrays = (block, token_bytes[block], token_chars[block])
        yield EncodedText(
            *(torch.from_numpy(a) for a in arrays), torch.from_numpy(doc), tuple(layout.names[first : last + 1])
        )
