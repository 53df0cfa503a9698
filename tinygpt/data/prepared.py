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

Beside the folders, ``scans/`` keeps each corpus's scan (every file checked as UTF-8 and its characters counted,
which the split plan needs), keyed by the files' identity as the folders are, so a start over unchanged files
reads none of them (``scan_documents``).

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
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from tinygpt.common.files import write_json_atomic
from tinygpt.data.documents import Document, scan_document
from tinygpt.data.encoded import EncodedText, TrainChunk
from tinygpt.data.errors import DataError
from tinygpt.data.root import default_cache_dir
from tinygpt.data.tokenizers import Tokenizer, tokenizer_from_json

FORMAT = "tinygpt-prepared-v3"  # bump when what a prepared folder holds, or how, changes (v3: narrowest dev arrays)
CACHE_ENV = "TINYGPT_PREPARED"  # where prepared folders live; default: <cache dir>/prepared
MANIFEST, TOKENIZER = "manifest.json", "tokenizer.json"
SCANS = "scans"  # the corpora's scans (scan_documents), beside the prepared folders
DEV_ARRAYS = ("ids", "bytes", "chars", "doc")
# a scored array's dtypes, narrowest first, each holding every value of the one before: mapped straight into tensors
# (torch computes with these, and not with uint16), nothing copied; a window is made int64 as it is read
SCORED_DTYPES = (np.dtype(np.uint8), np.dtype("<i2"), np.dtype("<i4"))


def prepared_root() -> Path:
    """Where prepared folders are kept: ``$TINYGPT_PREPARED``, else ``~/.cache/tinygpt/prepared`` (the data root
    may be a shared, read-only folder, so they are not written there)."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else default_cache_dir() / "prepared"


def fingerprint(description: dict) -> str:
    """The folder name for a description of what decides the contents (a JSON-able dict)."""
    text = json.dumps({"format": FORMAT, **description}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def ids_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= np.iinfo(np.uint16).max + 1 else np.dtype(np.uint32)


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


def _fits(array: np.ndarray, dtype: np.dtype) -> bool:
    """Every value of ``array`` is one of ``dtype``'s: by its dtype alone where it can only hold such values."""
    if np.can_cast(array.dtype, dtype, "safe") or not array.size:
        return True
    info = np.iinfo(dtype)
    return bool(array.min() >= info.min and array.max() <= info.max)


def append_values(path: Path, values: torch.Tensor | np.ndarray, dtype: np.dtype) -> None:
    """``values`` appended to ``path`` as ``dtype``: narrowed (train ids to uint16) only after a check that every
    value fits."""
    array = values.numpy() if isinstance(values, torch.Tensor) else values
    if not _fits(array, dtype):
        raise DataError(f"{path.name}: values outside {dtype.name} (a tokenizer larger than its vocabulary?)")
    with open(path, "ab") as file:
        file.write(np.ascontiguousarray(array, dtype=dtype))  # its buffer: no copy to bytes first


@dataclass(frozen=True)
class Encoded:
    """What a prepared folder is written from (``prepare``'s ``make``): made only when the folder is missing."""

    tokenizer: Tokenizer
    train: Iterable[EncodedText | TrainChunk]  # the train split's chunks, encoded one at a time, in order
    dev: Iterable[EncodedText] | None  # the dev split's chunks, likewise (a chunk's token_doc indexes its documents)
    extra: dict  # what the run reports about the splits (counts of the fit text, unseen characters)


def prepare(description: dict, make: Callable[[], Encoded], tokenizer: str | None = None) -> PreparedSplits:
    """The prepared folder for ``description`` (see ``fingerprint``): read when it exists, else written from
    ``make()`` (which reads and encodes the corpus) and then read. ``extra`` goes into the manifest, so that a run
    that maps the folder reports what the run that wrote it reported. tokenizer: the JSON of a tokenizer the caller
    brings (a checkpoint's): a folder that holds another is refused."""
    folder = prepared_root() / fingerprint(description)
    if (folder / MANIFEST).is_file():
        return read_prepared(folder, tokenizer)
    with staged(folder, MANIFEST) as staging:
        encoded = make()
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
            wide = next(dtype for dtype in SCORED_DTYPES if _fits(array, dtype))
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


@contextmanager
def scratch(name: str) -> Iterator[Path]:
    """A scratch folder beside the prepared folders (not /tmp, which may be memory), ``.<name>.<pid>.<random>``,
    removed when the block ends: files mapped in it stay readable through their mappings (the mapping is then the
    only way to them), and one that a killed process left is removed by the next (``remove_abandoned``)."""
    root = prepared_root()
    root.mkdir(parents=True, exist_ok=True)
    remove_abandoned(root / name)
    folder = Path(tempfile.mkdtemp(prefix=f".{name}.{os.getpid()}.", dir=root))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def staged(folder: Path, manifest: str) -> Iterator[Path]:
    """A staging folder beside ``folder`` (``.<name>.<pid>.<random>``) to write it in, renamed into place when the
    block ends (its ``manifest`` written last), removed when the block fails: a killed writer leaves no folder that
    looks complete, and the next one removes what it left (``remove_abandoned``). Another process that renamed the
    same folder into place first wins (its files are the same); the staging copy is dropped."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned(folder)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.{os.getpid()}.", dir=folder.parent))
    try:
        yield staging
        try:
            os.rename(staging, folder)
        except OSError:  # another process renamed the same folder into place first
            if not (folder / manifest).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def check_sizes(folder: Path, sizes: dict[str, int], kind: str, again: str) -> None:
    """Each file of ``folder`` (name -> the size its manifest says) must be that size: a truncated or edited file
    is refused in one line naming it (a ``kind`` file); ``again`` says what deleting the folder does."""
    for name, size in sizes.items():
        path = folder / name
        actual = path.stat().st_size if path.exists() else None
        if actual != size:
            raise DataError(
                f"{kind} {path} holds {actual if actual is not None else 'no'} bytes, its manifest says {size:,}; "
                f"delete {folder} to {again}"
            )


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


def remove_abandoned(folder: Path) -> None:
    """Remove the staging folders of prepares of ``folder`` whose process is gone (a prepare killed with SIGKILL,
    or by a crash, cannot remove its own): each is named ``.<fingerprint>.<pid>.<random>``. One of a live process,
    another job preparing the same folder at this moment, is left alone."""
    for staging in folder.parent.glob(f".{folder.name}.*.*"):
        try:
            pid = int(staging.name.split(".")[2])
            os.kill(pid, 0)
        except ProcessLookupError:  # its process is gone
            shutil.rmtree(staging, ignore_errors=True)
        except (ValueError, IndexError, PermissionError):  # not a name of ours, or another user's live process
            continue


def scan_documents(named: Sequence[tuple[str, Path]]) -> list[Document]:
    """Each (name, file) checked as UTF-8 and its characters counted (tinygpt/data/documents.py's scan_document),
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


def file_identity(paths: Sequence[Path]) -> list[tuple[str, int, int]]:
    """(path, size, modification time in ns) of each file: what says a corpus's files are the ones a folder was
    prepared from, without reading them."""
    out = []
    for path in paths:
        stat = Path(path).stat()
        out.append((str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns))
    return out
