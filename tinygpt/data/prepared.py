"""A corpus's encoded splits on disk, made once and memory-mapped by every run that reads the same text.

Why: before this, every run start (and every job of a sweep) re-read the corpus, refitted the tokenizer and
encoded train and dev into four int64 tensors a token (ids, bytes, characters, document: 32 bytes a token), so a
corpus of a few hundred megabytes needed tens of gigabytes of RAM, twelve times over for a twelve-job sweep. Now
the first run (or ``tinygpt-prepare``) writes a prepared folder and every later run maps it:

- ``train.ids``: the train split's token ids, ``uint16`` when the vocabulary fits, else ``uint32``, read with
  ``numpy.memmap``: the random windows of a batch touch only their own pages, and a training run needs nothing
  else of the train split (its loss is per token; bits per byte is scored on dev and test);
- ``dev.ids``, ``dev.bytes``, ``dev.chars``, ``dev.doc``: what exact bits per byte needs, each token's UTF-8 bytes
  and characters and its document, written a chunk at a time and memory-mapped into the tensors scoring reads
  (nothing converted or copied but a window at a time, tinygpt/data/windows.py: a large dev split costs disk and
  page cache, not the process's own memory). Each in the narrowest of ``uint8``, ``int16`` and ``int32`` that holds
  its values (the manifest says which; torch computes with all three, not with ``uint16``): characters take 4 to
  6 bytes a token (ids below 256 or 32,768, one to four bytes and one character a token, the document's index),
  GPT-2's tokens 7 to 10, where four ``int32`` took 16;
- ``tokenizer.json``: the fitted tokenizer (fitted on the train split only, as before);
- ``manifest.json``: the fingerprint, the counts, each file's size, and the tinygpt version.

The folder's name is a fingerprint of what decides its contents: the corpus's files (name, size, modification
time), the settings that decide each split's text (``text_settings``), the split unit and the tokenizer's config
(or, for a tokenizer given from a checkpoint, its JSON, unless the config's folder holds that very tokenizer:
datamodule.py's ``prepare_corpus``). The model's context, the batch size and the seed do not
enter it, so every job of a sweep over seeds, models or optimizers reuses one folder. The held-out split is not in
it: it stays a plan until ``test_dataloader``, the one scoring call, reads it.

The train split is read from disk, fitted on and encoded piece by piece (a piece is one document, or one file's
share of a split; a piece longer than 32 MiB in chunks cut where no token crosses: tinygpt/data/documents.py's
``read_chunks``) and appended to ``train.ids`` as it goes, so memory holds one chunk and its encoding, not the
train text or 32 bytes a token of the whole split. The ids are those of encoding each piece whole, so every
committed result reproduces.

Beside the folders, ``scans/`` keeps each corpus's scan (tinygpt/data/documents.py's ``scan_documents``). How a
folder lands on disk (its name, the staging folder renamed into place, the size checks) is tinygpt/data/store.py's.

Writes go into a temporary folder beside the final one, which is renamed into place when complete: a killed
prepare leaves no folder that looks complete, and the next run prepares it again (and removes the staging folder
the killed one left, once its process is gone). Two jobs that prepare the same
folder at once both finish; the second rename finds the first's folder and uses it (the contents are the same).
A folder whose files do not match its manifest (a truncated file, another tinygpt's format) is refused in one line
naming the file and what differs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from tinygpt.common.files import write_json_atomic
from tinygpt.data.encoded import EncodedText, TrainChunk
from tinygpt.data.errors import DataError
from tinygpt.data.store import FORMAT, append_values, fingerprint, fits, ids_dtype, prepared_root, scratch, staged
from tinygpt.data.tokenizers import Tokenizer, tokenizer_from_json

MANIFEST, TOKENIZER = "manifest.json", "tokenizer.json"
DEV_ARRAYS = ("ids", "bytes", "chars", "doc")
# a scored array's dtypes, narrowest first, each holding every value of the one before: mapped straight into tensors
# (torch computes with these, and not with uint16), nothing copied; a window is made int64 as it is read
SCORED_DTYPES = (np.dtype(np.uint8), np.dtype("<i2"), np.dtype("<i4"))


@dataclass(frozen=True)
class TrainTokens:
    """The train split as training reads it: its token ids, memory-mapped, and its counts."""

    tokens: np.ndarray  # a read-only numpy.memmap of uint16 or uint32 ids
    documents: tuple[str, ...]
    chars: int
    bytes: int

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def ids(self) -> torch.Tensor:
        """The ids as one int64 tensor, for the tools that read the whole split (data statistics, the collapse
        diagnostics): 8 bytes a token, made when asked; training reads ``tokens``."""
        return torch.from_numpy(np.asarray(self.tokens, dtype=np.int64))


@dataclass(frozen=True)
class PreparedSplits:
    folder: Path
    tokenizer: Tokenizer
    train: TrainTokens
    dev: EncodedText | None
    manifest: dict
    written: bool = False  # True when this call wrote the folder (False: mapped one an earlier run wrote)


def _map(path: Path, dtype: np.dtype, count: int, mode: str = "r") -> np.ndarray:
    """``path`` as a memmap of ``count`` items (``mode`` "r": read-only; "c": copy-on-write, which torch can wrap
    without a warning and which never writes the file), refused in one line when its size says otherwise."""
    if not path.is_file():
        raise DataError(f"prepared file {path} is missing; delete {path.parent} to prepare it again")
    expected = count * dtype.itemsize
    size = path.stat().st_size
    if size != expected:
        raise DataError(
            f"prepared file {path} holds {size:,} bytes, its manifest says {count:,} {dtype.name} = {expected:,}; "
            f"delete {path.parent} to prepare it again"
        )
    if count == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode=mode, shape=(count,))


def read_prepared(folder: Path, expected_tokenizer: str | None = None) -> PreparedSplits:
    """A complete prepared folder, checked against its manifest; ``expected_tokenizer``: the JSON of the tokenizer
    the caller brings, refused when the folder's differs."""
    manifest_path = folder / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as err:
        raise DataError(f"prepared folder {folder}: {MANIFEST} is unreadable ({err}); delete the folder") from None
    if manifest.get("format") != FORMAT:
        raise DataError(
            f"prepared folder {folder} is in format {manifest.get('format')!r}, this tinygpt reads {FORMAT!r}; "
            "delete the folder to prepare it again"
        )
    tokenizer_json = (folder / TOKENIZER).read_text()
    digest = hashlib.sha256(tokenizer_json.encode()).hexdigest()
    if digest != manifest["tokenizer"]["sha256"]:
        raise DataError(f"prepared file {folder / TOKENIZER} does not match its manifest's sha256; delete {folder}")
    if expected_tokenizer is not None and expected_tokenizer != tokenizer_json:
        raise DataError(f"prepared folder {folder} was encoded with another tokenizer than the one given")
    train = manifest["train"]
    dtype = np.dtype(manifest["ids_dtype"])
    tokens = _map(folder / "train.ids", dtype, train["tokens"])
    dev = None
    if manifest.get("dev") is not None:
        # memory-mapped, not read: a large dev split costs pages of the page cache as it is scored, not 32 bytes a
        # token of the process's own memory
        dev = _mapped_arrays(folder, manifest["dev"])
    return PreparedSplits(
        folder,
        tokenizer_from_json(tokenizer_json),
        TrainTokens(tokens, tuple(train["documents"]), train["chars"], train["bytes"]),
        dev,
        manifest,
    )


@dataclass(frozen=True)
class Encoded:
    """What a prepared folder is written from (``prepare``'s ``make``): made only when the folder is missing."""

    tokenizer: Tokenizer
    train: Iterable[EncodedText | TrainChunk]  # the train split's chunks, encoded one at a time, in order
    dev: Iterable[EncodedText] | None  # the dev split's chunks, likewise (a chunk's token_doc indexes its documents)
    extra: dict  # what the run reports about the splits (counts of the fit text, unseen characters)


def find_prepared(description: dict, tokenizer: str | None = None) -> PreparedSplits | None:
    """The complete prepared folder for ``description`` (see ``fingerprint``), mapped; None when there is none yet.
    tokenizer: the JSON of a tokenizer the caller brings (a checkpoint's): a folder that holds another is refused."""
    folder = prepared_root() / fingerprint(description)
    return read_prepared(folder, tokenizer) if (folder / MANIFEST).is_file() else None


def write_prepared(description: dict, encoded: Encoded, tokenizer: str | None = None) -> PreparedSplits:
    """Write the prepared folder for ``description`` from ``encoded`` (whose splits are encoded as they are
    written, a chunk at a time), then map it. ``extra`` goes into the manifest, so that a run that maps the folder
    reports what the run that wrote it reported. Another process that wrote the same folder first wins (its files
    are the same: ``staged``)."""
    folder = prepared_root() / fingerprint(description)
    with staged(folder, MANIFEST) as staging:
        tokenizer_json = encoded.tokenizer.to_json()
        (staging / TOKENIZER).write_text(tokenizer_json)
        dtype = ids_dtype(encoded.tokenizer.vocab_size)
        train_ids = staging / "train.ids"
        train_ids.touch()
        tokens = chars = n_bytes = 0
        documents: list[str] = []
        for piece in encoded.train:
            if isinstance(piece, TrainChunk) and piece.file is not None and not tokens:
                _link_or_copy(piece.file, train_ids)  # a shards corpus's whole train split (tinygpt/data/shards.py)
            else:
                append_values(train_ids, piece.ids, dtype)
            tokens, chars, n_bytes = tokens + len(piece), chars + piece.chars, n_bytes + piece.bytes
            documents += [name for name in piece.documents if not documents or documents[-1] != name]
        dev = None if encoded.dev is None else _write_arrays(staging, encoded.dev)
        manifest = {
            "format": FORMAT,
            "fingerprint": folder.name,
            "description": description,
            "ids_dtype": dtype.name,
            "tokenizer": {
                "name": encoded.tokenizer.name,
                "vocab_size": encoded.tokenizer.vocab_size,
                "sha256": hashlib.sha256(tokenizer_json.encode()).hexdigest(),
            },
            "train": {"tokens": tokens, "chars": chars, "bytes": n_bytes, "documents": documents},
            "dev": dev,
            "extra": encoded.extra,
        }
        write_json_atomic(staging / MANIFEST, manifest)  # last: a folder with a manifest is complete
    return replace(read_prepared(folder, tokenizer), written=True)


def holds_tokenizer(description: dict, tokenizer: str) -> bool:
    """Whether the complete prepared folder for ``description`` exists and holds exactly this tokenizer's JSON."""
    folder = prepared_root() / fingerprint(description)
    try:
        return (folder / MANIFEST).is_file() and (folder / TOKENIZER).read_text() == tokenizer
    except OSError:
        return False


def _link_or_copy(source: Path, target: Path) -> None:
    """``target`` becomes ``source``'s contents: a hard link (no second copy on disk) where the file system allows
    it, else a copy."""
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _write_arrays(staging: Path, chunks: Iterable[EncodedText]) -> dict:
    """A split's arrays (``dev.<array>``) appended chunk by chunk (a document continued from the last chunk keeps its
    index), each in the narrowest of SCORED_DTYPES that holds its values so far: a chunk with a value the file's
    dtype cannot hold widens what is written before it is appended (at most twice a file, ``_widen``), so the dtypes
    depend on the values alone, not on how the split was cut into chunks. Returns its manifest entry."""
    dtypes = dict.fromkeys(DEV_ARRAYS, SCORED_DTYPES[0])
    for name in DEV_ARRAYS:
        (staging / f"dev.{name}").touch()
    tokens = chars = n_bytes = 0
    documents: list[str] = []
    for chunk in chunks:
        continued = bool(documents and chunk.documents and chunk.documents[0] == documents[-1])
        first = len(documents) - 1 if continued else len(documents)
        documents += list(chunk.documents[1:] if continued else chunk.documents)
        doc = chunk.token_doc.numpy()
        values = (chunk.ids, chunk.token_bytes, chunk.token_chars, doc + np.int64(first) if first else doc)
        for name, array in zip(DEV_ARRAYS, values, strict=True):
            array = array.numpy() if isinstance(array, torch.Tensor) else array
            path = staging / f"dev.{name}"
            wide = next(dtype for dtype in SCORED_DTYPES if fits(array, dtype))
            if wide.itemsize > dtypes[name].itemsize:
                _widen(path, dtypes[name], wide)
                dtypes[name] = wide
            append_values(path, array, dtypes[name])
        tokens, chars, n_bytes = tokens + len(chunk), chars + chunk.chars, n_bytes + chunk.bytes
    return {
        "tokens": tokens,
        "chars": chars,
        "bytes": n_bytes,
        "documents": documents,
        "dtypes": {name: dtype.str for name, dtype in dtypes.items()},
    }


_WIDEN_BLOCK = 1 << 24  # values a block when a file is widened: memory stays bounded whatever its size


def _widen(path: Path, dtype: np.dtype, wider: np.dtype) -> None:
    """``path``'s values, written as ``dtype``, rewritten as ``wider`` a block at a time (through a file beside it,
    renamed over it)."""
    count = path.stat().st_size // dtype.itemsize
    target = path.with_name(path.name + ".wide")
    with open(path, "rb") as source, open(target, "wb") as out:
        for _ in range(0, count, _WIDEN_BLOCK):
            values = np.fromfile(source, dtype=dtype, count=_WIDEN_BLOCK)
            out.write(values.astype(wider))
    os.replace(target, path)


def _mapped_arrays(folder: Path, entry: dict) -> EncodedText:
    """A scored split's arrays (``_write_arrays``'s entry) memory-mapped into tensors, each in its own dtype."""
    dtypes = entry.get("dtypes") or {}
    allowed = [dtype.str for dtype in SCORED_DTYPES]
    if sorted(dtypes) != sorted(DEV_ARRAYS) or not set(dtypes.values()) <= set(allowed):
        raise DataError(
            f"prepared file {folder / MANIFEST}: its dev dtypes {dtypes} are not one of {allowed} for each of "
            f"{', '.join(DEV_ARRAYS)}; delete {folder} to prepare it again"
        )
    arrays = [
        torch.from_numpy(_map(folder / f"dev.{name}", np.dtype(dtypes[name]), entry["tokens"], "c"))
        for name in DEV_ARRAYS
    ]
    return EncodedText(*arrays, tuple(entry["documents"]), (entry["chars"], entry["bytes"]))


def mapped_text(chunks: Iterable[EncodedText]) -> EncodedText:
    """An encoded split, given a chunk at a time, as memory-mapped tensors: written to a scratch folder beside the
    prepared folders (not /tmp, which may be memory), mapped back and unlinked at once, so the mapping is the only
    way to it. What the held-out split is scored from: its text is encoded only when it is scored, never kept, and a
    large one costs disk and page cache while it is scored, not 32 bytes a token of the process's memory."""
    with scratch("scoring") as folder:
        return _mapped_arrays(folder, _write_arrays(folder, chunks))


def other_formats(root: Path) -> tuple[int, int]:
    """(folders, bytes) under ``root`` that a tinygpt of another prepared format wrote: this one never reads them,
    nor deletes them (another checkout on the machine may still map them), so it says they are there."""
    folders = size = 0
    for folder in root.iterdir() if root.is_dir() else ():
        try:
            written_as = json.loads((folder / MANIFEST).read_text()).get("format", "")
        except (OSError, ValueError, AttributeError):
            continue
        if written_as.startswith("tinygpt-prepared-") and written_as != FORMAT:
            folders += 1
            size += sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
    return folders, size


def other_formats_note(root: Path) -> str | None:
    """A line for a run or tinygpt-prepare that wrote a folder, when folders of another format lie beside it."""
    folders, size = other_formats(root)
    if not folders:
        return None
    return (
        f"note: {folders} prepared folder(s) under {root} ({size / 2**20:,.0f} MiB) are in another format than "
        f"{FORMAT} and unused by this tinygpt; delete them when no other tinygpt checkout on this machine maps them"
    )
