"""Corpora of records (JSONL, Parquet, a Hugging Face ``datasets`` dataset): each record's text is one document,
sent to train, dev or test by a seeded hash of its id, and written once into three UTF-8 files.

Why a hash: the corpora people move on to (TinyStories, FineWeb samples, their own JSONL dumps) hold millions of
records. A seeded choice of ``test_k`` whole documents (a folder corpus's rule) would hold out two stories of two
million, and a choice needs the whole list first. A record's split here depends on its id and ``data.split_seed``
alone: ``test`` when ``hash < test_fraction``, ``dev`` when below ``test_fraction + dev_fraction``, else ``train``.
So the shares scale with the corpus, no pass over the whole corpus is needed to decide one record, and a record
keeps its split when records are added. A record's id is its ``data.id_field`` when one is named, else its place
in the source (``<file>:<line>`` for JSONL, ``<file>:<row>`` for Parquet, the row number of a dataset), which is
stable as long as records are only appended. (llm.c's token shards are split by the same hash, as tokens:
tinygpt/data/shards.py.)

Why three files: the rest of tinygpt's data path reads documents from files, by byte range (the held-out text is
read only when it is scored, training maps its tokens: tinygpt/data/prepared.py). Written once into
``<prepared root>/records/<fingerprint>/{train,dev,test}.txt``, keyed by the source's identity (its files' names,
sizes and modification times, or a dataset's own fingerprint), the fields and the split rule, a records corpus is
then three documents that every later step reads as it reads any file, and every job of a sweep reuses them.
Each record is written as its text followed by a newline when it does not end in one (the one separator, counted
in the bytes that bits per byte divides by, as a folder corpus's files' own last newlines are). An empty record
is skipped and counted. Writes go to a staging folder renamed into place, so a killed pass leaves nothing that
looks complete.

The readers, by ``data.name``: ``READERS``. Parquet needs pyarrow and a dataset needs ``datasets``
(``pip install 'tinygpt[datasets]'``); a dataset is read through its own cache, offline when its files are there.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinygpt.common.files import write_json_atomic
from tinygpt.common.progress import Progress
from tinygpt.data.config import DataConfig
from tinygpt.data.errors import DataError
from tinygpt.data.store import check_sizes, file_identity, fingerprint, prepared_root, staged

SPLITS = ("train", "dev", "test")
STORE_MANIFEST = "records.json"
HASH_SCALE = float(1 << 64)


def split_of(record_id: str, seed: int, test_fraction: float, dev_fraction: float) -> str:
    """The split of the record with this id: a seeded hash of the id, uniform on [0, 1), against the shares."""
    digest = hashlib.blake2b(f"{seed}\x00{record_id}".encode(), digest_size=8).digest()
    position = int.from_bytes(digest, "little") / HASH_SCALE
    if position < test_fraction:
        return "test"
    if position < test_fraction + dev_fraction:
        return "dev"
    return "train"


# -- the readers: (config, location) -> the source's identity, and its records as (id, text) -------------------


def source_files(location: Path, config: DataConfig, default_glob: str) -> list[Path]:
    """The source's files: data.path itself, or the files under it matching data.glob (else ``default_glob``), in
    sorted name order."""
    if location.is_file():
        return [location]
    if not location.is_dir():
        raise DataError(f"{location} (data.path={config.path}) does not exist: give a {config.name} file or folder")
    glob = config.glob or default_glob
    files = sorted((p for p in location.glob(glob) if p.is_file()), key=lambda p: p.relative_to(location).as_posix())
    if not files:
        raise DataError(f"data.glob={glob!r} matches no files in {location} (data.path={config.path})")
    return files


def _record_text(record: Any, where: str, config: DataConfig) -> tuple[str | None, str]:
    """(its id field's value or None, its text) of one record; a record without the field, or with a text that is
    not a string, is refused naming where it is."""
    if not isinstance(record, dict):
        raise DataError(f"{where}: a record must be an object with a {config.text_field!r} field, got {record!r:.60}")
    if config.text_field not in record:
        raise DataError(
            f"{where}: no field {config.text_field!r} (data.text_field); the record has {sorted(record)[:8]}"
        )
    text = record[config.text_field]
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise DataError(f"{where}: field {config.text_field!r} is a {type(text).__name__}, not text")
    record_id = None
    if config.id_field is not None:
        if record.get(config.id_field) is None:
            raise DataError(
                f"{where}: no field {config.id_field!r} (data.id_field); the record has {sorted(record)[:8]}"
            )
        record_id = str(record[config.id_field])
    return record_id, text


def _jsonl_records(location: Path, config: DataConfig) -> Iterator[tuple[str, str]]:
    root = location if location.is_dir() else location.parent
    for path in source_files(location, config, "*.jsonl"):
        name = path.relative_to(root).as_posix()
        with path.open("rb") as file:
            for number, line in enumerate(file, start=1):
                if not line.strip():
                    continue
                where = f"{path}:{number}"
                try:
                    record = json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError) as err:
                    raise DataError(f"{where}: not a JSON record ({err})") from None
                record_id, text = _record_text(record, where, config)
                yield record_id or f"{name}:{number}", text


def _parquet_records(location: Path, config: DataConfig) -> Iterator[tuple[str, str]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataError("data=parquet needs pyarrow: pip install 'tinygpt[datasets]'") from None
    root = location if location.is_dir() else location.parent
    columns = [config.text_field] + ([config.id_field] if config.id_field else [])
    for path in source_files(location, config, "*.parquet"):
        name = path.relative_to(root).as_posix()
        source = pq.ParquetFile(path)
        missing = [c for c in columns if c not in source.schema_arrow.names]
        if missing:
            field = "data.text_field" if missing[0] == config.text_field else "data.id_field"
            raise DataError(f"{path}: no column {missing[0]!r} ({field}); it has {source.schema_arrow.names[:8]}")
        row = 0
        for batch in source.iter_batches(batch_size=4096, columns=columns):
            for record in batch.to_pylist():
                record_id, text = _record_text(record, f"{path}: row {row}", config)
                yield record_id or f"{name}:{row}", text
                row += 1


def _load_dataset(location: Path, config: DataConfig):
    try:
        import datasets
    except ImportError:
        raise DataError("data=hf needs the datasets library: pip install 'tinygpt[datasets]'") from None
    datasets.disable_progress_bars()
    try:
        if location.is_dir() and (
            (location / "dataset_info.json").exists() or (location / "dataset_dict.json").exists()
        ):
            dataset = datasets.load_from_disk(str(location))  # a dataset saved with save_to_disk
            if isinstance(dataset, datasets.DatasetDict):
                if config.dataset_split not in dataset:
                    raise DataError(
                        f"data.dataset_split={config.dataset_split!r}: {location} holds the splits {sorted(dataset)}"
                    )
                dataset = dataset[config.dataset_split]
        else:  # a hub name, or a folder of data files: the library's own loader and cache
            source = str(location) if location.exists() else config.path
            dataset = datasets.load_dataset(source, config.dataset_config, split=config.dataset_split)
    except DataError:
        raise
    except Exception as err:  # the library raises many kinds (not found, offline, no such split)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DataError(f"data.path={config.path}: the datasets library could not load it: {first}") from None
    if config.text_field not in dataset.column_names:
        raise DataError(
            f"data.path={config.path}: no column {config.text_field!r} (data.text_field); it has "
            f"{dataset.column_names[:8]}"
        )
    return dataset


def _hf_records(dataset, config: DataConfig) -> Iterator[tuple[str, str]]:
    row = 0
    for batch in dataset.iter(batch_size=1000):
        columns = list(batch)
        for values in zip(*(batch[c] for c in columns), strict=True):
            record_id, text = _record_text(dict(zip(columns, values, strict=True)), f"{config.path}: row {row}", config)
            yield record_id or str(row), text
            row += 1


@dataclass(frozen=True)
class Source:
    """A records source, opened: what says it is unchanged (without reading its records), and its records."""

    identity: list
    records: Callable[[], Iterator[tuple[str, str]]]


def _open_files(
    reader: Callable[[Path, DataConfig], Iterator[tuple[str, str]]], default_glob: str
) -> Callable[[Path, DataConfig], Source]:
    """A files source's opener: its identity is its files' (names, sizes, modification times)."""

    def open_(location: Path, config: DataConfig) -> Source:
        identity = file_identity(source_files(location, config, default_glob))
        return Source(identity, lambda: reader(location, config))

    return open_


def _open_hf(location: Path, config: DataConfig) -> Source:
    """A dataset, loaded once: its identity and its rows come from the same load (a hub dataset's load asks the hub
    for its revision, unless offline)."""
    dataset = _load_dataset(location, config)
    identity = [config.path, config.dataset_config, config.dataset_split, dataset._fingerprint, dataset.num_rows]
    return Source(identity, lambda: _hf_records(dataset, config))


# data.name -> how its source is opened; conf/data/<name>.yaml sets corpus: records
READERS: dict[str, Callable[[Path, DataConfig], Source]] = {
    "jsonl": _open_files(_jsonl_records, "*.jsonl"),
    "parquet": _open_files(_parquet_records, "*.parquet"),
    "hf": _open_hf,
}


# -- the store: three files, written once --------------------------------------------------------------------


def store_description(source: Source, config: DataConfig) -> dict:
    """What decides a store's contents: the source's identity, the fields and the split rule."""
    return {
        "records": config.name,
        "source": source.identity,
        "text_field": config.text_field,
        "id_field": config.id_field,
        "split_seed": config.split_seed,
        "test_fraction": config.test_fraction,
        "dev_fraction": config.dev_fraction if config.dev != "none" else 0.0,
    }


def record_store(location: Path, config: DataConfig) -> Path:
    """The folder holding the corpus's train.txt, dev.txt and test.txt: found, or written now (see the module
    docstring); raises DataError naming the record that cannot be read."""
    source = READERS[config.name](location, config)
    description = store_description(source, config)
    folder = prepared_root() / "records" / fingerprint(description)
    if (folder / STORE_MANIFEST).exists():
        _check_store(folder)
        return folder
    with staged(folder, STORE_MANIFEST) as staging:  # prepared folders' staging, rename and clean-up
        counts = {split: {"records": 0, "bytes": 0} for split in SPLITS}
        empty = 0
        dev_fraction = description["dev_fraction"]
        files = {split: (staging / f"{split}.txt").open("wb") for split in SPLITS}
        progress = Progress(f"reading the {config.name} records of {config.path}", None, unit="records")
        read = 0
        try:
            for record_id, text in source.records():
                read += 1
                progress.update(read)
                if not text:
                    empty += 1
                    continue
                split = split_of(record_id, config.split_seed, config.test_fraction, dev_fraction)
                data = (text if text.endswith("\n") else text + "\n").encode("utf-8")
                files[split].write(data)
                counts[split]["records"] += 1
                counts[split]["bytes"] += len(data)
            for file in files.values():  # on disk before the folder is renamed into place
                file.flush()
                os.fsync(file.fileno())
        finally:
            for file in files.values():
                file.close()
        if not counts["train"]["records"]:
            raise DataError(f"data.path={config.path}: no record with text went to the train split ({empty} empty)")
        write_json_atomic(staging / STORE_MANIFEST, {**description, "splits": counts, "empty_records": empty})
    return folder


def _check_store(folder: Path) -> None:
    """A store's files must be the sizes its manifest says (a truncated or edited file would change the text every
    later run trains and is scored on): refused in one line naming the file."""
    try:
        splits = json.loads((folder / STORE_MANIFEST).read_text())["splits"]
        expected = {split: int(splits[split]["bytes"]) for split in SPLITS}
    except (OSError, ValueError, KeyError, TypeError):
        manifest = folder / STORE_MANIFEST
        raise DataError(f"{manifest} is unreadable; delete {folder} to write the records again") from None
    check_sizes(
        folder, {f"{split}.txt": size for split, size in expected.items()}, "records file", "write the records again"
    )


def store_counts(folder: Path) -> dict:
    """The records and bytes each split of a store holds, and how many records were empty."""
    manifest = json.loads((folder / STORE_MANIFEST).read_text())
    return {"splits": manifest["splits"], "empty_records": manifest["empty_records"]}
