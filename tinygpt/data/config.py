"""The `data` config group, read into one validated, typed object.

The Hydra group conf/data/ is flat on purpose (`data.fraction=half`, `data.dev=documents` are easy overrides).
DataConfig lists the fields once and is itself Hydra's schema of the group (``data/schema``, first in every
corpus yaml's defaults), so the composed ``data`` node becomes a DataConfig with ``OmegaConf.to_object``, and a
plain dict is read by tinygpt/common/typed.py against the same class: a misspelled key or a wrong type fails the
same way from a yaml, an override or a dict. The values and their combinations are checked once, on
construction, so that an impossible setting fails with the field's name and the allowed values instead of
surfacing later as a confusing shape error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from omegaconf import MISSING, OmegaConf

from tinygpt.common.errors import require
from tinygpt.data.errors import DataError
from tinygpt.data.tokenizers import TokenizerConfig

NAMED_FRACTIONS = {"quarter": 0.25, "half": 0.5, "full": 1.0}
CORPUS_KINDS = ("file", "dir", "records", "shards")  # shards: llm.c token shards (tinygpt/data/shards.py)
DEV_MODES = ("tail", "documents", "none")
SPLIT_UNITS = ("chars", "tokens")
SPLIT_RULES = ("choice", "hash")  # data.split_by (null: choice)


def parse_fraction(value: Any) -> float:
    """`fraction` as a float in (0, 1]; the names quarter/half/full are accepted too, so that the plain
    override `data.fraction=quarter` works as well as choosing the config group `data/fraction=quarter`."""
    if isinstance(value, str):
        key = value.strip().lower()
        if key in NAMED_FRACTIONS:
            return NAMED_FRACTIONS[key]
        try:
            value = float(key)
        except ValueError:
            raise DataError(
                f"data.fraction={value!r}: expected a number in (0, 1] or one of {sorted(NAMED_FRACTIONS)}"
            ) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataError(f"data.fraction={value!r}: expected a number in (0, 1] or one of {sorted(NAMED_FRACTIONS)}")
    value = float(value)
    if not (0.0 < value <= 1.0) or math.isnan(value):
        raise DataError(f"data.fraction={value}: must be in (0, 1] (1.0 = all of the fit text)")
    return value


@dataclass
class DataConfig:
    """The `data` group's fields, types and defaults, written once: Hydra's schema and the typed object.

    root, test_*, split_seed, dev_fraction, split_unit and the batch sizes default to the settings every corpus
    shares, so conf/data/<corpus>.yaml leaves them out. It sets the rest (name, corpus, path, glob, dev, dev_k),
    whose defaults are the Time Machine's, the default corpus, for Python callers that pass a partial dict."""

    name: str = "timemachine"  # a corpus in tinygpt/data/sources.py's NAMED_CORPORA, or textfile | textdir | jsonl ...
    root: str | None = None  # the data root; null: $TINYGPT_DATA, else ~/.cache/tinygpt
    corpus: str = "file"  # file | dir | records | shards
    path: str = "timemachine/timemachine.txt"  # the file or directory, relative to the data root or absolute
    glob: str | None = None  # dir corpora: the documents
    # Held-out test: a file corpus holds out its last test_fraction; a directory corpus the listed
    # test_documents, else a seeded (split_seed) choice of test_k documents. Read only when scored.
    test_fraction: float = 0.1
    test_documents: tuple[str, ...] = ()
    test_k: int = 2
    split_seed: int = 0
    dev: str = "tail"  # tail | documents | none
    dev_fraction: float = 0.1
    dev_k: int = 10  # dev=documents only
    # folder corpora: how whole documents are held out and, with dev=documents, chosen for dev. null or choice: the
    # listed test_documents, else a seeded choice of test_k (and of dev_k); hash: each document by a seeded hash of
    # its name, test_fraction of them held out, dev_fraction more for dev (records corpora always split so)
    split_by: str | None = None
    split_unit: str = "chars"  # chars | tokens (tokens needs a tokenizer fixed in advance: bytes, gpt2)
    batch_size: int = 32
    eval_batch_size: int = 32
    # processes that encode the train split when it is prepared (datasets' num_proc): 1 = this process, on all
    # cores through tokenizers' threads. The prepared folder is the same whatever the number.
    num_proc: int = 1
    fraction: float | int | str = 1.0  # a number in (0, 1] or quarter | half | full; a float once constructed
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    # records corpora (data=jsonl | parquet | hf: tinygpt/data/records.py): each record's text one document, its
    # split a seeded hash of its id (test_fraction, then dev_fraction, of the records)
    text_field: str = "text"  # the field (column) holding a record's text
    id_field: str | None = None  # the field naming a record; null: its place in the source
    dataset_split: str = "train"  # data=hf: the dataset's split to read
    dataset_config: str | None = None  # data=hf: the dataset's configuration (its "name" in load_dataset)

    def __post_init__(self) -> None:
        self.fraction = parse_fraction(self.fraction)  # a float from here on
        self.test_documents = tuple(self.test_documents)
        self.validate()

    def validate(self) -> None:
        """The values and their combinations (the types are the schema's)."""
        if self.path in ("???", ""):
            raise DataError(
                f"data.path is required for data={self.name}: give the corpus file or directory, "
                "relative to the data root or absolute (e.g. data.path=/home/me/book.txt)"
            )
        _check_choice("data.corpus", self.corpus, CORPUS_KINDS)
        _check_choice("data.dev", self.dev, DEV_MODES)
        _check_choice("data.split_unit", self.split_unit, SPLIT_UNITS)
        _check_unit_interval("data.test_fraction", self.test_fraction, allow_zero=True)
        _check_unit_interval("data.dev_fraction", self.dev_fraction, allow_zero=False)
        for name in ("test_k", "split_seed"):
            _check_int(f"data.{name}", getattr(self, name), minimum=0)
        for name in ("dev_k", "batch_size", "eval_batch_size", "num_proc"):
            _check_int(f"data.{name}", getattr(self, name), minimum=1)
        if not all(self.test_documents):
            raise DataError(f"data.test_documents={list(self.test_documents)}: expected non-empty file names")
        if self.corpus == "file":
            if self.dev == "documents":
                raise DataError(
                    "data.dev=documents needs a directory corpus (data.corpus=dir); a single file has one "
                    "document, so use data.dev=tail or data.dev=none"
                )
            if self.test_documents:
                raise DataError("data.test_documents applies to directory corpora only; use data.test_fraction")
        elif self.corpus == "dir":
            if not self.glob:
                raise DataError('data.glob is required for a directory corpus, e.g. data.glob="*.txt"')
            if self.split_by == "hash":
                if self.test_documents:
                    raise DataError(
                        "data.test_documents lists the held-out documents, but data.split_by=hash chooses them by "
                        "a hash of their names; set data.split_by=choice to list them"
                    )
                for name in ("test_k", "dev_k"):
                    if getattr(self, name) != DEFAULTS[name]:
                        raise DataError(
                            f"data.{name}={getattr(self, name)} counts documents chosen under data.split_by=choice; "
                            f"data={self.name} splits by a hash of their names (data.test_fraction, "
                            "data.dev_fraction): set data.split_by=choice to choose a number of them"
                        )
        else:
            if self.dev == "documents" or self.test_documents:
                raise DataError(
                    f"data={self.name} splits its records by a seeded hash of their ids: set the shares with "
                    "data.test_fraction and data.dev_fraction (data.dev=documents and data.test_documents are for "
                    "folder corpora)"
                )
            if self.split_unit == "tokens":
                raise DataError(f"data={self.name} splits by records: data.split_unit=tokens is not allowed")
            if self.corpus == "shards" and self.tokenizer.name != "gpt2":
                raise DataError(
                    f"data.tokenizer={self.tokenizer.name}: data={self.name} reads GPT-2 token ids as the shards hold "
                    "them; use data.tokenizer=gpt2"
                )
        if self.split_by is not None:
            _check_choice("data.split_by", self.split_by, SPLIT_RULES)
        if self.split_by is not None and self.corpus == "file":
            raise DataError(
                f"data.split_by={self.split_by} applies to folder corpora: a file corpus holds out its last "
                "data.test_fraction of the characters"
            )
        if self.split_by == "choice" and self.corpus in ("records", "shards"):
            raise DataError(
                f"data={self.name} splits its records by a hash of their ids: data.split_by=choice is not allowed"
            )
        if self.corpus != "records":
            for name in RECORD_FIELDS:
                if getattr(self, name) != RECORD_DEFAULTS[name]:
                    raise DataError(
                        f"data.{name}={getattr(self, name)!r} applies to records corpora only (data=jsonl, parquet "
                        f"or hf), not data={self.name}"
                    )
        if self.split_unit == "tokens" and self.tokenizer.needs_fitting:
            raise DataError(
                f"data.split_unit=tokens needs a tokenizer fixed in advance (bytes or gpt2): the "
                f"{self.tokenizer.name} tokenizer is fitted on the train split, so the splits cannot be "
                "defined by its tokens. Use data.split_unit=chars with it."
            )


def register_data_schema() -> None:
    """``data/schema``: DataConfig with name and path required. Every corpus yaml gives both, and the
    ``path: ???`` of textfile and textdir must stay missing (merging ??? does not write over a default) so that
    such a run fails naming it."""
    from hydra.core.config_store import ConfigStore

    node = OmegaConf.structured(DataConfig)
    node.name = node.path = MISSING
    ConfigStore.instance().store(group="data", name="schema", node=node)


def _check_choice(field_name: str, value: Any, allowed: tuple[str, ...]) -> None:
    require(value in allowed, field_name, value, "one of " + ", ".join(allowed), DataError)


def _check_unit_interval(field_name: str, value: float, *, allow_zero: bool) -> None:
    ok = 0 <= value < 1 and (value != 0 or allow_zero)
    require(ok, field_name, value, f"a number in {'[0, 1)' if allow_zero else '(0, 1)'}", DataError)


def _check_int(field_name: str, value: int, *, minimum: int) -> None:
    require(value >= minimum, field_name, value, f"an integer >= {minimum}", DataError)


DEFAULTS = {f.name: f.default for f in fields(DataConfig) if f.name in ("test_k", "dev_k")}

# the records corpora's own settings (tinygpt/data/records.py), and their defaults
RECORD_FIELDS = ("text_field", "id_field", "dataset_split", "dataset_config")
RECORD_DEFAULTS = {f.name: f.default for f in fields(DataConfig) if f.name in RECORD_FIELDS}

# where the files are read from, and how a model batches and tokenizes the text: not what the text is
NOT_TEXT = ("root", "batch_size", "eval_batch_size", "tokenizer", "num_proc")


def text_settings(config: DataConfig) -> dict[str, Any]:
    """The settings (``data.<field>``) that decide the characters of each split: two configs that agree on them give
    a character-level baseline (compressors, Kneser-Ney: tinygpt/baselines) the same texts, whatever the model's
    tokenizer, batch size or data root. The one rule for "the same text" (the baselines' cache, the report)."""
    return {
        f"data.{f.name}": getattr(config, f.name)
        for f in fields(config)
        if f.name not in NOT_TEXT
        and (config.corpus == "records" or f.name not in RECORD_FIELDS)
        and (f.name != "split_by" or config.split_by == "hash")  # choice is null's rule: older keys unchanged
    }
