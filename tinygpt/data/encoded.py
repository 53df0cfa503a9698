"""Encoded text: token ids plus, for every token, what it covers of the original text.

`token_bytes` (UTF-8 bytes of the original text in the token) and `token_chars` (characters that start in it)
are what make bits per byte exact for every tokenizer; `token_doc` says which document each token belongs to,
for per-document scores. Each document piece is encoded on its own, so no token straddles two documents.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from tinygpt.data.documents import split_text
from tinygpt.data.tokenizers import Tokenizer, tokenizer_from_json


@dataclass(frozen=True)
class EncodedText:
    # integer tensors [N]: int64 from encode_segments, narrower from encode_parts and as a prepared folder's dev split
    # is mapped (prepared.py: uint8, int16 or int32 each); a window is made int64 as it is read (windows.py)
    ids: torch.Tensor
    token_bytes: torch.Tensor
    token_chars: torch.Tensor
    token_doc: torch.Tensor  # index into documents
    documents: tuple[str, ...]
    # (characters, bytes) when known without a pass over the arrays: a mapped split's, from its manifest, so that
    # counting it does not read every page of a large one
    counts: tuple[int, int] | None = None

    def __len__(self) -> int:
        return int(self.ids.numel())

    @property
    def bytes(self) -> int:
        return self.counts[1] if self.counts is not None else int(self.token_bytes.sum())

    @property
    def chars(self) -> int:
        return self.counts[0] if self.counts is not None else int(self.token_chars.sum())

    def slice(self, start: int, stop: int) -> EncodedText:
        """Tokens [start, stop), with the document list narrowed to the documents they belong to."""
        doc = self.token_doc[start:stop]
        if doc.numel() == 0:
            return EncodedText(doc.clone(), doc.clone(), doc.clone(), doc.clone(), ())
        first, last = int(doc[0]), int(doc[-1])  # documents are contiguous runs, in order
        return EncodedText(
            self.ids[start:stop],
            self.token_bytes[start:stop],
            self.token_chars[start:stop],
            doc - first,
            self.documents[first : last + 1],
        )


def encode_segments(tokenizer: Tokenizer, segments: Sequence[tuple[str, str]]) -> EncodedText:
    """Encode (document name, text) segments, each on its own, and concatenate them in order."""
    names = tuple(name for name, _ in segments)
    encoded = tokenizer.encode_many_with_offsets([text for _, text in segments])
    if not encoded:
        empty = torch.zeros(0, dtype=torch.long)
        return EncodedText(empty, empty.clone(), empty.clone(), empty.clone(), ())
    ids, token_bytes, token_chars = (torch.cat(parts) for parts in zip(*encoded, strict=True))
    lengths = torch.tensor([part[0].numel() for part in encoded])
    token_doc = torch.repeat_interleave(torch.arange(len(segments)), lengths)
    return EncodedText(ids, token_bytes, token_chars, token_doc, names)


def encode_parts(tokenizer: Tokenizer, parts: Sequence[tuple[str, str]]) -> EncodedText:
    """(document name, text) parts of a scored split, in order, encoded in one ``encode_many_arrays`` call (on all
    cores) into arrays in the dtypes the tokenizer gives (char: int16 ids, uint8 counts), which a prepared folder
    narrows further as it writes them (prepared.py's ``_write_arrays``): each of the three gathered in one pass into
    memory allocated once, never widened to int64 on the way (for characters, whose encoder is a table lookup, such
    passes cost more than the encoding). Consecutive parts under one name are one document (a document read in
    chunks and cut into parts): one index in ``token_doc`` (int32)."""
    names = [name for name, _ in parts]
    starts = np.array([i == 0 or names[i] != names[i - 1] for i in range(len(names))], dtype=bool)
    part_doc = (np.cumsum(starts) - 1).astype(np.int32)  # part -> its document in this batch
    encoded = tokenizer.encode_many_arrays([text for _, text in parts])
    lengths = np.array([part[0].size for part in encoded], dtype=np.int64)
    arrays = []
    for k in range(3):  # ids, token_bytes, token_chars
        pieces = [part[k] for part in encoded]
        out = np.empty(int(lengths.sum()), dtype=np.result_type(*pieces) if pieces else np.int32)
        if out.size:
            np.concatenate(pieces, out=out)
        arrays.append(torch.from_numpy(out))
    token_doc = torch.from_numpy(np.repeat(part_doc, lengths))
    documents = tuple(name for name, start in zip(names, starts, strict=True) if start)
    counts = (int(arrays[2].numpy().sum(dtype=np.int64)), int(arrays[1].numpy().sum(dtype=np.int64)))
    return EncodedText(*arrays, token_doc, documents, counts)


@dataclass(frozen=True)
class TrainChunk:
    """A chunk of the train split as a prepared folder keeps it: its ids, and the characters and bytes it covers."""

    ids: np.ndarray  # integer ids: as the tokenizer gives them (encode_ids_many), uint16 as an llm.c shard holds them
    chars: int
    bytes: int
    documents: tuple[str, ...]
    file: Path | None = None  # a file that holds exactly these ids in the folder's dtype: linked, not copied

    def __len__(self) -> int:
        return int(self.ids.size)


PART_CHARS = 1 << 20  # a chunk is encoded in parts of about this many characters, on all cores


def encode_train_chunk(tokenizer: Tokenizer, document: str, text: str) -> TrainChunk:
    """One chunk of the train split (read_chunks's) encoded: cut into parts at newlines that no pre-token crosses
    (tinygpt/data/documents.py's ``split_text``) and encoded together, which for a Hugging Face tokenizer is one
    ``encode_batch`` call that runs the parts on all cores in Rust; the ids are those of the chunk whole."""
    parts = split_text(text, PART_CHARS)
    ids = tokenizer.encode_ids_many(parts)
    return TrainChunk(
        np.concatenate(ids) if ids else np.zeros(0, np.int64), len(text), len(text.encode("utf-8")), (document,)
    )


_worker_tokenizer: Tokenizer | None = None  # an encoding process's own copy (encode_train_chunks)


def _start_worker(tokenizer_json: str) -> None:
    """An encoding process: one thread (``tokenizers``' own switch, which the numpy encoders follow too), since
    its siblings take the other cores."""
    global _worker_tokenizer
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _worker_tokenizer = tokenizer_from_json(tokenizer_json)


def _encode_in_worker(document: str, text: str) -> TrainChunk:
    assert _worker_tokenizer is not None
    return encode_train_chunk(_worker_tokenizer, document, text)


def encode_train_chunks(
    tokenizer: Tokenizer, chunks: Iterable[tuple[str, str]], processes: int
) -> Iterator[TrainChunk]:
    """The train split's (document, text) chunks encoded, in order: in this process (a chunk's parts on all cores,
    ``encode_train_chunk``) when ``processes`` is 1, else in that many processes, a chunk each, one thread each
    (``data.num_proc``). Processes also run what one process's threads cannot: a folder of short documents is a
    chunk a document, each too short to cut into parts, so in one process it is encoded on one core; and cutting a
    chunk and gathering its ids run beside the other chunks' encoding instead of between them. At most two chunks
    a process are in flight, so memory stays bounded; the ids are the same either way (the chunks and their order
    do not change, and a chunk's ids are those of the chunk whole)."""
    if processes <= 1:
        for document, text in chunks:
            yield encode_train_chunk(tokenizer, document, text)
        return
    # fork where there is one: spawn and forkserver import the caller's main module again in every process, which
    # a script without a __main__ guard (a Python API user's) cannot survive. The processes only encode with numpy
    # and tokenizers, whose own threads a fork turns off (its atfork handler), as TOKENIZERS_PARALLELISM does.
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with ProcessPoolExecutor(processes, context, initializer=_start_worker, initargs=(tokenizer.to_json(),)) as pool:
        pending: deque[Future] = deque()
        for document, text in chunks:
            pending.append(pool.submit(_encode_in_worker, document, text))
            if len(pending) >= 2 * processes:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
