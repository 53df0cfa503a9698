"""Encoded text: token ids plus, for every token, what it covers of the original text.

`token_bytes` (UTF-8 bytes of the original text in the token) and `token_chars` (characters that start in it)
are what make bits per byte exact for every tokenizer; `token_doc` says which document each token belongs to,
for per-document scores. Each document piece is encoded on its own, so no token straddles two documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tinygpt.data.documents import split_text
from tinygpt.data.tokenizers import Tokenizer


@dataclass(frozen=True)
class EncodedText:
    ids: torch.Tensor  # Long[N]
    token_bytes: torch.Tensor  # Long[N]
    token_chars: torch.Tensor  # Long[N]
    token_doc: torch.Tensor  # Long[N]: index into documents
    documents: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.ids.numel())

    @property
    def bytes(self) -> int:
        return int(self.token_bytes.sum())

    @property
    def chars(self) -> int:
        return int(self.token_chars.sum())

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


@dataclass(frozen=True)
class TrainChunk:
    """A chunk of the train split as a prepared folder keeps it: its ids, and the characters and bytes it covers."""

    ids: np.ndarray  # integer ids: int64 as encoded here, uint16 as an llm.c shard holds them (data/shards.py)
    chars: int
    bytes: int
    documents: tuple[str, ...]

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
