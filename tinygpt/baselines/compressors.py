"""Compressors given the training text: what a general-purpose compressor pays for the scored text (003).

003's number for bz2 "given the training posts" is the growth of the compressed size when the scored text is
appended to the training text: 8·(|C(train + text)| − |C(train)|) bits, so the compressor may use everything
in the training text (within its own window or block) to code the new text. Per document it is exactly 003's
formula over the document's bytes. For the whole split the first character is given too, like every model's
first position: 8·(|C(train + text)| − |C(train + text[0])|) bits over the bytes of text[1:], the GPT's
scored bytes. Levels: bz2 9 (900 KB blocks), lzma preset 9 (xz container), zlib 9 (a 32 KB window, so it
sees only the training text's last 32 KB).

Each document recompresses the whole training text, so the documents are compressed in parallel threads
(CPython's bz2, lzma and zlib release the GIL while they compress); the result does not depend on it.
"""

from __future__ import annotations

import bz2
import lzma
import os
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from tinygpt.common.errors import ConfigError

COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "bz2": lambda data: bz2.compress(data, 9),
    "lzma": lambda data: lzma.compress(data, preset=9),
    "zlib": lambda data: zlib.compress(data, 9),
}


def compressed_bits(name: str, train: bytes, text: bytes, given: bytes = b"", train_size: int | None = None) -> int:
    """8·(|C(train + given + text)| − |C(train + given)|): the bits to code `text` after `train + given`.
    train_size: |C(train)| when already known and `given` is empty (it is the same for every document)."""
    if name not in COMPRESSORS:
        raise ConfigError(f"compressor {name!r} is not known; choose one of {', '.join(COMPRESSORS)}")
    compress = COMPRESSORS[name]
    base = train_size if (train_size is not None and not given) else len(compress(train + given))
    return 8 * (len(compress(train + given + text)) - base)


def score_compressor(name: str, train: str, text: str, documents: list[str]) -> dict:
    """bits and bytes for the whole scored text (first character given) and for each document (003)."""
    train_b = train.encode("utf-8")
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        whole = pool.submit(compressed_bits, name, train_b, text[1:].encode("utf-8"), text[:1].encode("utf-8"))
        base = len(COMPRESSORS[name](train_b))
        docs = [doc.encode("utf-8") for doc in documents]
        bits = list(pool.map(lambda doc: compressed_bits(name, train_b, doc, train_size=base), docs))
        all_bits = whole.result()
    per_document = [{"bits": b, "bytes": len(doc)} for b, doc in zip(bits, docs, strict=True)]
    return {"bits": all_bits, "bytes": len(text[1:].encode("utf-8")), "per_document": per_document}
