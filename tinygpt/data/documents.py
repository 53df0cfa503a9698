"""Documents on disk, and pieces of them that can be read without reading the rest.

Splits are planned as lists of Pieces: character ranges of documents that also carry their byte ranges. This
is what keeps the held-out text away from training code: the plan for the test split is a few numbers and file
names, and its text is read from disk (seek + read of exactly its bytes) only when a test-scoring call asks.

Encoding policy: corpora must be valid UTF-8. A file that is not fails at start-up, naming the file and the
byte offset of the first bad byte, rather than being silently "repaired", which would change the text that
every model is scored on and the byte count that bits per byte divides by.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tinygpt.common.files import write_json_atomic
from tinygpt.data.errors import DataError
from tinygpt.data.store import file_identity, fingerprint, prepared_root


@dataclass(frozen=True)
class Document:
    name: str  # the file's name (its path relative to the corpus directory for dir corpora)
    path: Path
    chars: int
    bytes: int


@dataclass(frozen=True)
class Piece:
    """Characters [char_start, char_end) of one document: bytes [byte_start, byte_end) of its file."""

    document: str
    path: Path
    char_start: int
    char_end: int
    byte_start: int
    byte_end: int

    @property
    def chars(self) -> int:
        return self.char_end - self.char_start

    @property
    def bytes(self) -> int:
        return self.byte_end - self.byte_start


def scan_document(name: str, path: Path) -> Document:
    """Check that the file is UTF-8 and count its characters and bytes. Only the counts are kept."""
    raw = path.read_bytes()
    try:
        # Decoding is the validation; the decoded text is a temporary and is dropped on return.
        n_chars = len(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise DataError(
            f"{path}: not valid UTF-8 at byte offset {error.start} "
            f"(byte 0x{raw[error.start]:02x}: {error.reason}). "
            "tinygpt reads corpora as UTF-8 and fails rather than guess; convert the file in place (a copy beside "
            f"it would be read too), e.g. `iconv -f latin1 -t utf-8 {path} > {path}.utf8 && mv {path}.utf8 {path}`"
        ) from None
    return Document(name=name, path=path, chars=n_chars, bytes=len(raw))


def whole(document: Document) -> Piece:
    return Piece(document.name, document.path, 0, document.chars, 0, document.bytes)


def total_chars(pieces: Sequence[Piece]) -> int:
    return sum(piece.chars for piece in pieces)


def total_bytes(pieces: Sequence[Piece]) -> int:
    return sum(piece.bytes for piece in pieces)


def split_pieces(pieces: Sequence[Piece], n_chars: int) -> tuple[list[Piece], list[Piece]]:
    """Cut a sequence of pieces after its first n_chars characters: (head, tail). Empty pieces are dropped."""
    head: list[Piece] = []
    tail: list[Piece] = []
    remaining = n_chars
    for piece in pieces:
        if remaining >= piece.chars:
            head.append(piece)
            remaining -= piece.chars
        elif remaining <= 0:
            tail.append(piece)
        else:
            cut_char = piece.char_start + remaining
            cut_byte = _byte_offset_of_char(piece.path, cut_char)
            head.append(replace(piece, char_end=cut_char, byte_end=cut_byte))
            tail.append(replace(piece, char_start=cut_char, byte_start=cut_byte))
            remaining = 0
    return [p for p in head if p.chars], [p for p in tail if p.chars]


CHUNK_BYTES = 1 << 25  # 32 MiB: a piece longer than this is read, fitted on and encoded a chunk at a time


def read_chunks(piece: Piece, chunk_bytes: int = CHUNK_BYTES) -> Iterator[str]:
    """The piece's text in order, in chunks of about ``chunk_bytes``: the whole piece at once when it is no longer
    (every corpus of a few megabytes), so memory holds one chunk of a file of any size.

    A chunk ends at a newline with a non-space character on each side. No tokenizer's pre-token crosses such a
    newline (GPT-2's pattern, which byte-level BPE uses, makes it a token of its own; characters and bytes have no
    context), so encoding the chunks one by one gives exactly the tokens of the whole piece. A stretch of
    ``chunk_bytes`` with no such newline is read on until one comes (or the piece ends)."""
    if piece.bytes <= chunk_bytes:
        yield read_piece(piece)
        return
    chars = 0
    with open(piece.path, "rb") as f:
        f.seek(piece.byte_start)
        left, carry = piece.bytes, b""
        while left or carry:
            block = f.read(min(chunk_bytes, left))
            left -= len(block)
            data = carry + block
            cut = _last_safe_newline(data) if left else len(data)
            if cut <= 0:  # no safe newline yet: read on
                carry = data
                continue
            text = data[:cut].decode("utf-8")
            chars += len(text)
            carry = data[cut:]
            yield text
    if chars != piece.chars:
        raise DataError(f"{piece.path} changed on disk while tinygpt was using it; restart the run")


def split_text(text: str, size: int) -> list[str]:
    """``text`` in parts of about ``size`` characters, each but the last ending just after a newline with a
    non-space character on each side: read_chunks's cut, so the parts encoded one by one (in parallel, by
    tokenizers' ``encode_batch``) give exactly the tokens of the whole text. A stretch with no such newline stays
    in one part."""
    parts, start = [], 0
    while len(text) - start > size:
        at = text.find("\n", start + size)
        while at != -1 and not (0 < at < len(text) - 1 and not text[at - 1].isspace() and not text[at + 1].isspace()):
            at = text.find("\n", at + 1)
        if at == -1:
            break
        parts.append(text[start : at + 1])
        start = at + 1
    parts.append(text[start:])
    return parts


def _last_safe_newline(data: bytes) -> int:
    """The offset just after the last newline of ``data`` with a non-space character on each side, or 0
    (read_chunks). Python's ``isspace`` holds for every Unicode White_Space character, the ``\\s`` of GPT-2's
    pattern, so a newline it lets through is one the pattern splits at."""
    at = data.rfind(b"\n", 0, max(len(data) - 4, 0))  # the character after it is whole
    while at > 0:
        if not _char_before(data, at).isspace() and not _char_at(data, at + 1).isspace():
            return at + 1
        at = data.rfind(b"\n", 0, at)
    return 0


def _char_before(data: bytes, end: int) -> str:
    start = end - 1
    while start > 0 and end - start < 4 and data[start] & 0xC0 == 0x80:  # UTF-8 continuation bytes: 10xxxxxx
        start -= 1
    return data[start:end].decode("utf-8", "replace")


def _char_at(data: bytes, start: int) -> str:
    end = start + 1
    while end < len(data) and end - start < 4 and data[end] & 0xC0 == 0x80:
        end += 1
    return data[start:end].decode("utf-8", "replace")


def read_piece_bytes(piece: Piece) -> bytes:
    """The piece's UTF-8 bytes as they are on disk, not decoded."""
    with open(piece.path, "rb") as f:
        f.seek(piece.byte_start)
        return f.read(piece.bytes)


def read_piece(piece: Piece) -> str:
    text = read_piece_bytes(piece).decode("utf-8")
    if len(text) != piece.chars:
        raise DataError(f"{piece.path} changed on disk while tinygpt was using it; restart the run")
    return text


def _byte_offset_of_char(path: Path, char_index: int) -> int:
    """Byte offset where character char_index starts in a UTF-8 file (UTF-8 continuation bytes are 10xxxxxx;
    every other byte starts a character). Reads raw bytes only; no text is decoded here."""
    raw = np.fromfile(path, dtype=np.uint8)
    starts = np.flatnonzero((raw & 0xC0) != 0x80)
    return int(starts[char_index]) if char_index < len(starts) else int(raw.size)


SCANS = "scans"  # the corpora's scans (scan_documents), beside the prepared folders


def scan_documents(named: Sequence[tuple[str, Path]]) -> list[Document]:
    """Each (name, file) checked as UTF-8 and its characters counted (``scan_document``),
    once: the counts are kept under the prepared root (``scans/``), keyed by the files' identity (path, size,
    modification time, as a prepared folder is), so that a later start over the same files reads none of them. A
    folder of gigabytes took seconds a start to scan (docs/benchmarks/data.md); a changed file changes the key and is
    scanned, and checked, again."""
    identity = file_identity([path for _, path in named])
    cached = prepared_root() / SCANS / f"{fingerprint({'scan': [name for name, _ in named], 'files': identity})}.json"
    try:
        chars = json.loads(cached.read_text())["chars"]
        if len(chars) == len(named) and all(isinstance(n, int) for n in chars):
            return [
                Document(name, path, n_chars, size)
                for (name, path), n_chars, (_, size, _) in zip(named, chars, identity, strict=True)
            ]
    except (OSError, ValueError, KeyError, TypeError):
        pass  # not scanned yet, or a damaged record: scan
    documents = [scan_document(name, path) for name, path in named]
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(cached, {"chars": [document.chars for document in documents]})
    except OSError:
        pass  # a cache that cannot be written: the next start scans again
    return documents


@dataclass(frozen=True)
class Corpus:
    """A corpus found and scanned (tinygpt/data/corpus.py's ``open_corpus``): its kind, where it is, its documents."""

    name: str
    kind: str  # data.corpus: a name in tinygpt/data/kinds/ (file | dir | records | shards)
    location: Path
    documents: tuple[Document, ...]
    checksummed: bool  # True for named corpora: every file matched its published sha256
    found_in: str = "the data root"  # where a relative data.path was found: "the current folder" or the data root

    @property
    def chars(self) -> int:
        return sum(d.chars for d in self.documents)

    @property
    def bytes(self) -> int:
        return sum(d.bytes for d in self.documents)
