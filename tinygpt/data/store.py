"""The on-disk toolkit of tinygpt's cache of prepared data: where it lives, folder names from fingerprints, the
files' identity, writing a folder in a staging folder renamed into place, scratch folders, size checks against a
manifest, and appending arrays.

Why one module: the prepared folders (tinygpt/data/prepared.py), the records' and the shards' stores
(tinygpt/data/records.py, shards.py), the scans (tinygpt/data/documents.py) and the token cuts' scratch files
(tinygpt/data/token_cuts.py) all write into the same cache, the same way: named by a fingerprint of what decides
their contents, written where a killed writer leaves nothing that looks complete, and checked against their
manifest when read. What any of them holds is its own module's business; how it lands on disk is this one's.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from tinygpt.data.errors import DataError
from tinygpt.data.root import default_cache_dir

FORMAT = "tinygpt-prepared-v3"  # bump when what a prepared folder holds, or how, changes (v3: narrowest dev arrays)
CACHE_ENV = "TINYGPT_PREPARED"  # where prepared folders live; default: <cache dir>/prepared


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


def fits(array: np.ndarray, dtype: np.dtype) -> bool:
    """Every value of ``array`` is one of ``dtype``'s: by its dtype alone where it can only hold such values."""
    if np.can_cast(array.dtype, dtype, "safe") or not array.size:
        return True
    info = np.iinfo(dtype)
    return bool(array.min() >= info.min and array.max() <= info.max)


def append_values(path: Path, values: torch.Tensor | np.ndarray, dtype: np.dtype) -> None:
    """``values`` appended to ``path`` as ``dtype``: narrowed (train ids to uint16) only after a check that every
    value fits."""
    array = values.numpy() if isinstance(values, torch.Tensor) else values
    if not fits(array, dtype):
        raise DataError(f"{path.name}: values outside {dtype.name} (a tokenizer larger than its vocabulary?)")
    with open(path, "ab") as file:
        file.write(np.ascontiguousarray(array, dtype=dtype))  # its buffer: no copy to bytes first


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


def file_identity(paths: Sequence[Path]) -> list[tuple[str, int, int]]:
    """(path, size, modification time in ns) of each file: what says a corpus's files are the ones a folder was
    prepared from, without reading them."""
    out = []
    for path in paths:
        stat = Path(path).stat()
        out.append((str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns))
    return out
