"""The `data` config group, read into one validated, typed object.

The Hydra group conf/data/ is flat on purpose (`data.fraction=half`, `data.dev=documents` are easy overrides).
DataConfig checks every field once, up front, so that a typo or an impossible combination fails with the
field's name and the allowed values instead of surfacing later as a confusing shape error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tinygpt.data.errors import DataError

NAMED_FRACTIONS = {"quarter": 0.25, "half": 0.5, "full": 1.0}
CORPUS_KINDS = ("file", "dir")
DEV_MODES = ("tail", "documents", "none")
SPLIT_UNITS = ("chars", "tokens")
DEFAULT_BPE_VOCAB = 2048


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


@dataclass(frozen=True)
class TokenizerConfig:
    name: str = "char"
    vocab_size: int | None = None  # bpe only: the size to train to (default 2048)

    @staticmethod
    def from_mapping(raw: Any) -> TokenizerConfig:
        if isinstance(raw, str):  # tolerate `tokenizer: bytes` written by hand
            raw = {"name": raw}
        if not isinstance(raw, Mapping):
            raise DataError(f"data.tokenizer={raw!r}: expected a mapping like {{name: char}}")
        unknown = set(raw) - {"name", "vocab_size"}
        if unknown:
            raise DataError(f"data.tokenizer has unknown keys {sorted(unknown)}; allowed: name, vocab_size")
        name = raw.get("name")
        from tinygpt.data.tokenizers import TOKENIZERS  # the registry of names (it imports this module's types)

        if name not in TOKENIZERS:
            raise DataError(f"data.tokenizer.name={name!r}: unknown tokenizer; choose one of {list(TOKENIZERS)}")
        vocab_size = raw.get("vocab_size")
        if name == "bpe":
            vocab_size = DEFAULT_BPE_VOCAB if vocab_size is None else vocab_size
            if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 257:
                raise DataError(
                    f"data.tokenizer.vocab_size={vocab_size!r}: byte-level BPE starts from the 256 byte "
                    "values, so the vocabulary must be an integer of at least 257"
                )
        elif vocab_size is not None:
            raise DataError(
                f"data.tokenizer.vocab_size={vocab_size!r}: only bpe takes a vocab_size; {name}'s is "
                "fixed by its definition (char: the fit text's characters + 1, bytes: 256, gpt2: 50257)"
            )
        return TokenizerConfig(name=name, vocab_size=vocab_size)

    @property
    def needs_fitting(self) -> bool:
        """char and bpe learn their vocabulary from the fit text; bytes and gpt2 are fixed in advance."""
        from tinygpt.data.tokenizers import TOKENIZERS

        return TOKENIZERS[self.name].needs_fitting


@dataclass(frozen=True)
class DataConfig:
    name: str = "timemachine"
    root: str | None = None
    corpus: str = "file"
    path: str = "timemachine/timemachine.txt"
    glob: str | None = None
    test_fraction: float = 0.1
    test_documents: tuple[str, ...] = ()
    test_k: int = 2
    split_seed: int = 0
    dev: str = "tail"
    dev_fraction: float = 0.1
    dev_k: int = 10
    split_unit: str = "chars"
    batch_size: int = 32
    eval_batch_size: int = 32
    fraction: float = 1.0
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)

    @staticmethod
    def from_any(cfg: Any) -> DataConfig:
        """Read the `data` node of a Hydra config (a DictConfig) or a plain dict with the same keys."""
        if isinstance(cfg, DataConfig):
            return cfg
        raw = _to_plain_dict(cfg)
        allowed = set(DataConfig.__dataclass_fields__)
        unknown = set(raw) - allowed
        if unknown:
            raise DataError(f"data has unknown keys {sorted(unknown)}; allowed keys: {sorted(allowed)}")
        values = dict(raw)
        values["tokenizer"] = TokenizerConfig.from_mapping(values.get("tokenizer", {"name": "char"}))
        values["fraction"] = parse_fraction(values.get("fraction", 1.0))
        values["test_documents"] = tuple(values.get("test_documents") or ())
        config = DataConfig(**values)
        config.validate()
        return config

    def validate(self) -> None:
        if self.path in (None, "???", ""):
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
        for name in ("dev_k", "batch_size", "eval_batch_size"):
            _check_int(f"data.{name}", getattr(self, name), minimum=1)
        if not all(isinstance(doc, str) and doc for doc in self.test_documents):
            raise DataError(f"data.test_documents={list(self.test_documents)}: expected a list of file names")
        if self.corpus == "file":
            if self.dev == "documents":
                raise DataError(
                    "data.dev=documents needs a directory corpus (data.corpus=dir); a single file has one "
                    "document, so use data.dev=tail or data.dev=none"
                )
            if self.test_documents:
                raise DataError("data.test_documents applies to directory corpora only; use data.test_fraction")
        else:
            if not self.glob:
                raise DataError('data.glob is required for a directory corpus, e.g. data.glob="*.txt"')
        if self.split_unit == "tokens" and self.tokenizer.needs_fitting:
            raise DataError(
                f"data.split_unit=tokens needs a tokenizer fixed in advance (bytes or gpt2): the "
                f"{self.tokenizer.name} tokenizer is fitted on the train split, so the splits cannot be "
                "defined by its tokens. Use data.split_unit=chars with it."
            )


@dataclass
class TokenizerSchema:
    """data.tokenizer's types (TokenizerConfig.from_mapping checks the values)."""

    name: str = "char"  # a name in tinygpt/data/tokenizers.py's TOKENIZERS
    vocab_size: int | None = None  # bpe only


@dataclass
class DataSchema:
    """The `data` group's schema (stored as data/schema, first in every conf/data/*.yaml's defaults): each key
    typed, so a misspelled key or a wrong type fails at composition, naming it. The values here are the
    settings every corpus shares, written once; DataConfig.from_any checks the values and the combinations."""

    name: str = "???"
    root: str | None = None  # the data root; null: $TINYGPT_DATA, else ~/.cache/tinygpt
    corpus: str = "file"  # file | dir
    path: str = "???"  # the file or directory, relative to the data root or absolute
    glob: str | None = None  # dir corpora: the documents
    # Held-out test: a file corpus holds out its last test_fraction; a directory corpus the listed
    # test_documents, else a seeded (split_seed) choice of test_k documents. Read only when scored.
    test_fraction: float = 0.1
    test_documents: list[str] = field(default_factory=list)
    test_k: int = 2
    split_seed: int = 0
    dev: str = "tail"  # tail | documents | none
    dev_fraction: float = 0.1
    dev_k: int = 10  # dev=documents only
    split_unit: str = "chars"  # chars | tokens (tokens needs a tokenizer fixed in advance: bytes, gpt2)
    batch_size: int = 32
    eval_batch_size: int = 32
    fraction: Any = 1.0  # a number in (0, 1] or quarter | half | full (parse_fraction)
    tokenizer: TokenizerSchema = field(default_factory=TokenizerSchema)


def register_data_schema() -> None:
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(group="data", name="schema", node=DataSchema)


def _to_plain_dict(cfg: Any) -> dict:
    try:
        from omegaconf import DictConfig, OmegaConf
    except ImportError:  # pragma: no cover - omegaconf is a dependency
        DictConfig = ()  # type: ignore[assignment]
    if DictConfig and isinstance(cfg, DictConfig):
        cfg = OmegaConf.to_container(cfg, resolve=True)
    if not isinstance(cfg, Mapping):
        raise DataError(f"data config must be a mapping (the `data` node of the Hydra config), got {type(cfg)}")
    return dict(cfg)


def _check_choice(field_name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise DataError(f"{field_name}={value!r}: choose one of {list(allowed)}")


def _check_unit_interval(field_name: str, value: Any, *, allow_zero: bool) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (0 <= value < 1)
    if not ok or (value == 0 and not allow_zero):
        interval = "[0, 1)" if allow_zero else "(0, 1)"
        raise DataError(f"{field_name}={value!r}: must be a number in {interval}")


def _check_int(field_name: str, value: Any, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DataError(f"{field_name}={value!r}: must be an integer >= {minimum}")
