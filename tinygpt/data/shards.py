"""llm.c / modded-nanogpt token shards, read as they stand: GPT-2 ids split by document, never decoded.

Why: prepared FineWeb and TinyStories shards in llm.c's ``.bin`` format (a header of 256 int32: magic 20240520,
version 1, the token count; then GPT-2 ids as uint16) are passed around and trained on as they are. Decoding them
to text and encoding it again would cost GPT-2's encoding speed for ids that are already there, and would lose what
llm.c's tokens hold between documents: every document starts with ``<|endoftext|>``, which the model learns to
predict. Here the ids are copied, never re-tokenized, at the speed of a copy.

Splits: the documents, not the shards, go to train, dev and test, by the seeded hash of their ids that records
corpora use (tinygpt/data/records.py's ``split_of``: test_fraction, then dev_fraction, of the documents). A
document starts at an ``<|endoftext|>`` and runs to the next; its id is ``<shard>:<offset of its
<|endoftext|>>``. llm.c's writers fill each shard to its size, cutting the document in progress, so the tokens
before a shard's first ``<|endoftext|>`` continue the previous shard's last document and go where it went (in the
first shard, they are a document of their own, ``<shard>:0``). The shares scale with the corpus, a document keeps
its split when shards are appended, and a held-out document is never split between held-out and train.

Bits per byte: a GPT-2 id always stands for the same bytes, so each token's UTF-8 bytes and characters are table
lookups (``token_tables``). ``<|endoftext|>`` stands for no text: 0 bytes, 0 characters, while its loss counts, as it
does in llm.c's validation: predicting where a document ends is part of coding the corpus.

The store: one streaming pass (a block of ``BLOCK`` tokens at a time, so memory stays bounded whatever the shards'
size) writes ``<prepared root>/tokens/<fingerprint>/{train,dev,test}.ids`` (uint16, documents in the shards'
order) and ``tokens.json`` (the counts), keyed by the shards' identity (names, sizes, modification times) and the
split rule; staging and rename as a records store's, so a killed pass leaves nothing that looks complete. The
rest of the data path reads the three files as a records corpus's three text files: the train and dev splits
through the prepared folder (tinygpt/data/prepared.py), the held-out ids only when scored.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from tinygpt.common.files import write_json_atomic
from tinygpt.common.progress import Progress
from tinygpt.data.config import DataConfig
from tinygpt.data.encoded import EncodedText, TrainChunk
from tinygpt.data.errors import DataError
from tinygpt.data.records import SPLITS, source_files, split_of
from tinygpt.data.store import check_sizes, file_identity, fingerprint, prepared_root, staged
from tinygpt.data.tokenizers import Tokenizer

LLMC_MAGIC, LLMC_VERSION, LLMC_HEADER_INTS = 20240520, 1, 256  # llm.c's token shards (its dev/data/data_common.py)
GPT2_EOT = 50256  # <|endoftext|>: llm.c's fineweb.py and tinyshakespeare.py start every document with it
STORE_MANIFEST = "tokens.json"
BLOCK = 1 << 23  # tokens read, split and counted at a time: 16 MiB of uint16


def read_shard(path: Path) -> np.ndarray:
    """The GPT-2 token ids of an llm.c / modded-nanogpt ``.bin`` shard, memory-mapped; anything else is refused in
    one line naming the file and what differs."""
    header = np.fromfile(path, dtype="<i4", count=LLMC_HEADER_INTS)
    if header.size < LLMC_HEADER_INTS or header[0] != LLMC_MAGIC:
        found = int(header[0]) if header.size else None
        raise DataError(f"{path}: not an llm.c token shard (magic {found}, expected {LLMC_MAGIC})")
    if header[1] != LLMC_VERSION:
        raise DataError(f"{path}: llm.c shard version {int(header[1])}, this tinygpt reads version {LLMC_VERSION}")
    count, size = int(header[2]), path.stat().st_size
    if size != 4 * LLMC_HEADER_INTS + 2 * count:
        raise DataError(
            f"{path}: its header says {count:,} tokens ({4 * LLMC_HEADER_INTS + 2 * count:,} bytes), the file holds "
            f"{size:,} bytes (truncated?)"
        )
    tokens = np.memmap(path, dtype="<u2", mode="r", offset=4 * LLMC_HEADER_INTS, shape=(count,))
    if count and int(tokens.max()) > GPT2_EOT:
        raise DataError(f"{path}: holds token id {int(tokens.max())}, above GPT-2's vocabulary (0..{GPT2_EOT})")
    return tokens


def token_tables(tokenizer: Tokenizer) -> tuple[np.ndarray, np.ndarray]:
    """(UTF-8 bytes, characters) of every GPT-2 id, ``<|endoftext|>`` counting none (see the module docstring)."""
    token_bytes, token_chars = tokenizer.token_lengths()
    token_bytes[GPT2_EOT] = token_chars[GPT2_EOT] = 0
    return token_bytes, token_chars


def _documents(name: str, tokens: np.ndarray, carried: int | None, config: DataConfig) -> tuple[np.ndarray, ...]:
    """(starts, split codes, whether each starts a document) of a shard's segments: one at each <|endoftext|>, and
    the tokens before the first, which continue the previous shard's document (split ``carried``)."""
    if not tokens.size:
        return np.zeros(0, np.int64), np.zeros(0, np.uint8), np.zeros(0, bool)
    eots = np.flatnonzero(tokens == GPT2_EOT)
    starts = eots if eots.size and eots[0] == 0 else np.concatenate([[0], eots]).astype(np.int64)
    dev_fraction = config.dev_fraction if config.dev != "none" else 0.0
    codes = np.array(
        [
            SPLITS.index(split_of(f"{name}:{start}", config.split_seed, config.test_fraction, dev_fraction))
            for start in starts
        ],
        dtype=np.uint8,
    )
    new = np.ones(starts.size, dtype=bool)
    if tokens[0] != GPT2_EOT and carried is not None:
        codes[0], new[0] = carried, False
    return starts, codes, new


def store_description(location: Path, config: DataConfig) -> dict:
    """What decides a store's contents: the shards as they are on disk and the split rule."""
    return {
        "shards": file_identity(source_files(location, config, "*.bin")),
        "split_seed": config.split_seed,
        "test_fraction": config.test_fraction,
        "dev_fraction": config.dev_fraction if config.dev != "none" else 0.0,
    }


def token_store(location: Path, config: DataConfig, tokenizer: Tokenizer) -> Path:
    """The folder holding the shards' train.ids, dev.ids and test.ids: found (and checked), or written now."""
    paths = source_files(location, config, "*.bin")
    description = store_description(location, config)
    folder = prepared_root() / "tokens" / fingerprint(description)
    if (folder / STORE_MANIFEST).exists():
        check_store(folder)
        return folder
    shards = [(path, read_shard(path)) for path in paths]  # every shard checked before anything is written
    token_bytes, token_chars = token_tables(tokenizer)
    root = location if location.is_dir() else location.parent
    counts = {split: {"tokens": 0, "documents": 0, "bytes": 0, "chars": 0} for split in SPLITS}
    with staged(folder, STORE_MANIFEST) as staging:
        files = [(staging / f"{split}.ids").open("wb") for split in SPLITS]
        total = sum(int(tokens.size) for _, tokens in shards)
        progress = Progress(f"splitting the token shards of {config.path}", total, unit="tokens", rate=True)
        done, carried = 0, None
        try:
            for path, tokens in shards:
                starts, codes, new = _documents(path.relative_to(root).as_posix(), tokens, carried, config)
                for code in range(len(SPLITS)):
                    counts[SPLITS[code]]["documents"] += int((new & (codes == code)).sum())
                bounds = np.append(starts, tokens.size)
                for begin in range(0, tokens.size, BLOCK):
                    end = min(tokens.size, begin + BLOCK)
                    first = int(np.searchsorted(bounds, begin, side="right")) - 1
                    last = int(np.searchsorted(bounds, end, side="left"))
                    lengths = np.minimum(bounds[first + 1 : last + 1], end) - np.maximum(bounds[first:last], begin)
                    code = np.repeat(codes[first:last], lengths)
                    block = np.asarray(tokens[begin:end])
                    for index, split in enumerate(SPLITS):
                        kept = block[code == index]
                        files[index].write(kept.astype("<u2").tobytes())
                        counts[split]["tokens"] += int(kept.size)
                        counts[split]["bytes"] += int(token_bytes[kept].sum())
                        counts[split]["chars"] += int(token_chars[kept].sum())
                    done += end - begin
                    progress.update(done)
                if codes.size:
                    carried = int(codes[-1])
            for file in files:  # on disk before the folder is renamed into place
                file.flush()
                os.fsync(file.fileno())
        finally:
            for file in files:
                file.close()
        if not counts["train"]["tokens"]:
            raise DataError(f"data.path={config.path}: no document of the shards went to the train split")
        write_json_atomic(staging / STORE_MANIFEST, {**description, "splits": counts})
    return folder


def store_counts(folder: Path) -> dict:
    """Each split's tokens, documents, bytes and characters, as the store's manifest holds them."""
    return json.loads((folder / STORE_MANIFEST).read_text())["splits"]


def check_store(folder: Path) -> None:
    """A store's files must hold the tokens its manifest says: refused in one line naming the file."""
    try:
        expected = {split: 2 * int(counts["tokens"]) for split, counts in store_counts(folder).items()}
    except (OSError, ValueError, KeyError, TypeError):
        raise DataError(f"{folder / STORE_MANIFEST} is unreadable; delete {folder} to split the shards again") from None
    check_sizes(
        folder, {f"{split}.ids": size for split, size in expected.items()}, "token file", "split the shards again"
    )


def split_ids(path: Path) -> np.ndarray:
    """A store's split file as a read-only memmap of uint16 ids."""
    if path.stat().st_size == 0:
        return np.zeros(0, dtype=np.uint16)
    return np.memmap(path, dtype="<u2", mode="r")


def encoded_blocks(path: Path, tokenizer: Tokenizer) -> Iterator[EncodedText]:
    """A dev or held-out split file as scoring reads it, a block at a time: each token's bytes and characters from
    the tables, one document (the file: per-document scores are per split, as a records corpus's)."""
    token_bytes, token_chars = token_tables(tokenizer)
    ids = split_ids(path)
    for begin in range(0, ids.size, BLOCK):
        block = torch.from_numpy(np.asarray(ids[begin : begin + BLOCK], dtype=np.int64))
        empty = torch.zeros(block.numel(), dtype=torch.long)
        yield EncodedText(
            block, torch.from_numpy(token_bytes)[block], torch.from_numpy(token_chars)[block], empty, (path.name,)
        )


def train_chunks(path: Path, tokenizer: Tokenizer, fraction: float) -> Iterator[TrainChunk]:
    """The first ``fraction`` of the train file's ids, a block at a time, with the bytes and characters they
    stand for: what the prepared folder's train.ids is written from. The whole file (``fraction`` 1) is one chunk
    naming the file, which the prepared folder links instead of copying, with the store's counts."""
    ids = split_ids(path)
    if fraction == 1.0:
        counts = store_counts(path.parent)["train"]
        yield TrainChunk(ids, counts["chars"], counts["bytes"], (path.name,), file=path)
        return
    token_bytes, token_chars = token_tables(tokenizer)
    keep = int(ids.size * fraction)
    for begin in range(0, keep, BLOCK):
        block = np.asarray(ids[begin : min(keep, begin + BLOCK)])
        yield TrainChunk(block, int(token_chars[block].sum()), int(token_bytes[block].sum()), (path.name,))
