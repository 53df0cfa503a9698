"""Tokenizers behind one small interface: char, bytes, bpe (trained here) and gpt2 (GPT-2's own BPE).

Every tokenizer can say, for each token, how many UTF-8 bytes of the original text it covers and how many
characters start in it (`encode_with_offsets`). Bits per byte divides by the bytes of the text, not of the
tokens, so this is what makes the metric exact and comparable across tokenizers, including the char
tokenizer's unknown id 0, which covers whatever character it replaced.

`to_json` / `tokenizer_from_json` carry the whole tokenizer (the fitted vocabulary, or the full BPE model), so
a checkpoint that embeds the JSON needs nothing else to turn ids back into text.
"""

from __future__ import annotations

import functools
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import torch

from tinygpt.common.errors import ConfigError
from tinygpt.data.errors import DataError

if TYPE_CHECKING:
    from tinygpt.data.root import DataRoot

DEFAULT_BPE_VOCAB = 2048  # data.tokenizer.vocab_size's default for bpe
# data.tokenizer.fit_bytes's default for bpe: a larger train split is fitted on a seeded sample of this size. The
# trainer's word counts grow with the text and its merges settle long before (GPT-2's were learned on a sample of
# WebText); every corpus tinygpt's results come from is smaller, so they are fitted whole, as before.
DEFAULT_BPE_FIT_BYTES = 256 * 2**20

TOKENIZER_FILE = "tokenizer.json"
Offsets = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # ids, token_bytes, token_chars: Long[N] each
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray]  # the same as numpy integer arrays, each in its narrowest dtype


class Tokenizer(ABC):
    name: str
    needs_fitting: bool  # True when the vocabulary is learned from the fit text

    @property
    @abstractmethod
    def vocab_size(self) -> int: ...

    @abstractmethod
    def encode_arrays(self, text: str) -> Arrays:
        """(ids, token_bytes, token_chars) as numpy integer arrays in the narrowest dtype the tokenizer has them in
        (char: int16 ids, uint8 counts): per token, the UTF-8 bytes of `text` it covers and the number of characters
        that start in it. token_bytes sums to len(text.encode()), token_chars to len(text). What a scored split is
        written from (encoded.py's ``encode_parts``), with no int64 copy on the way."""

    def encode_with_offsets(self, text: str) -> Offsets:
        """``encode_arrays`` as int64 tensors: what every caller that computes with the counts takes."""
        return _as_offsets(self.encode_arrays(text))

    @abstractmethod
    def decode(self, ids: Sequence[int] | torch.Tensor) -> str: ...

    @abstractmethod
    def _payload(self) -> dict: ...

    def encode(self, text: str) -> list[int]:
        return self.encode_with_offsets(text)[0].tolist()

    def encode_many_arrays(self, texts: Sequence[str]) -> list[Arrays]:
        """Each text encoded (``encode_arrays``), on all cores: the numpy encoders' (char, bytes) array work
        releases the GIL, as ``encode_batch`` runs a Hugging Face tokenizer's in Rust."""
        return _on_all_cores(self.encode_arrays, texts)

    def encode_many_with_offsets(self, texts: Sequence[str]) -> list[Offsets]:
        """``encode_many_arrays`` as int64 tensors (``encode_with_offsets``)."""
        return [_as_offsets(arrays) for arrays in self.encode_many_arrays(texts)]

    def encode_ids_many(self, texts: Sequence[str]) -> list[np.ndarray]:
        """The ids of each text (an integer array in the tokenizer's own dtype), without the per-token counts: what a
        train split needs (written narrowed to the folder's dtype, prepared.py's ``append_values``)."""
        return [arrays[0] for arrays in self.encode_many_arrays(texts)]

    def token_lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """(UTF-8 bytes, characters that start) of every id, indexed by id (int64 copies, for the caller to change):
        what bits per byte counts for ids encoded elsewhere or cut from a file of ids. Only a tokenizer whose every
        id always stands for the same bytes has them (bytes, gpt2, a fitted BPE)."""
        raise DataError(f"the {self.name} tokenizer has no fixed bytes per id (its unknown id covers any character)")

    def unseen_count(self, text: str) -> int:
        """Characters of text the vocabulary cannot represent (only char has any; byte-level ones none)."""
        return self.unseen_in(self.encode_arrays(text)[0])

    def unseen_in(self, ids: np.ndarray) -> int:
        """The characters that ids encoded by this tokenizer stand in for unseen (char's unknown id is one each)."""
        return 0

    def to_json(self) -> str:
        return json.dumps({"kind": self.name, "format": 1, **self._payload()}, ensure_ascii=False)

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / TOKENIZER_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json(), encoding="utf-8")
        return path

    def __repr__(self) -> str:
        return f"{type(self).__name__}(vocab_size={self.vocab_size})"


_Encoded = TypeVar("_Encoded")


def _on_all_cores(encode: Callable[[str], _Encoded], texts: Sequence[str]) -> list[_Encoded]:
    """``encode`` of each text, in order, on a thread per core this process may use: numpy's array work releases
    the GIL, so the numpy encoders (char, bytes) run the parts of a chunk side by side, as ``encode_batch`` runs a
    Hugging Face tokenizer's (docs/benchmarks/README.md)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if os.environ.get("TOKENIZERS_PARALLELISM", "").lower() in ("false", "0"):  # tokenizers' own switch, as in Rust
        cores = 1
    if len(texts) < 2 or cores < 2:
        return [encode(text) for text in texts]
    with ThreadPoolExecutor(min(cores, len(texts))) as pool:
        return list(pool.map(encode, texts))


def _as_offsets(arrays: Arrays) -> Offsets:
    ids, token_bytes, token_chars = (torch.from_numpy(a.astype(np.int64, copy=False)) for a in arrays)
    return ids, token_bytes, token_chars


def _as_int_array(ids: Sequence[int] | torch.Tensor) -> np.ndarray:
    if isinstance(ids, torch.Tensor):
        return ids.detach().cpu().numpy().astype(np.int64, copy=False).reshape(-1)
    return np.asarray(ids, dtype=np.int64).reshape(-1)


CODE_POINTS = 0x110000  # U+0000 to U+10FFFF


@functools.cache
def _utf8_length_table() -> np.ndarray:
    """The UTF-8 length of every code point (1.1 MB of uint8): a character's bytes are one gather."""
    codepoints = np.arange(CODE_POINTS, dtype=np.uint32)
    lengths = np.ones(CODE_POINTS, dtype=np.uint8)
    for start in (0x80, 0x800, 0x10000):
        lengths += codepoints >= start
    return lengths


def _codepoints(text: str) -> np.ndarray:
    # UTF-32 gives one fixed-width code unit per character: a vectorized view of the text, no Python loop.
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")


class CharTokenizer(Tokenizer):
    """One id per character of the fit text, in code point order from 1; id 0 is every unseen character."""

    name = "char"
    needs_fitting = True
    UNKNOWN_ID = 0
    UNKNOWN_TEXT = "\ufffd"  # what id 0 decodes to

    def __init__(self, chars: str):
        if len(set(chars)) != len(chars):
            raise DataError("CharTokenizer: the vocabulary has repeated characters")
        self.chars = "".join(sorted(chars))
        self._sorted_codepoints = _codepoints(self.chars).astype(np.int64)
        # code point -> id, for every code point (2.2 MB): encoding is one gather, not a binary search a character
        # (int16 when the ids fit, else int32 and 4.5 MB: the smaller table stays in cache better)
        dtype = np.int16 if len(self.chars) <= np.iinfo(np.int16).max else np.int32
        self._table = np.zeros(CODE_POINTS, dtype=dtype)
        self._table[self._sorted_codepoints] = np.arange(1, len(self.chars) + 1, dtype=dtype)

    @classmethod
    def fit(cls, texts: str | Iterable[str]) -> CharTokenizer:
        """The characters of ``texts``, read one text at a time (a stream of a large corpus's chunks): each text's
        code points marked in a table of all of them, one scatter a text."""
        seen = np.zeros(CODE_POINTS, dtype=bool)
        for text in [texts] if isinstance(texts, str) else texts:
            seen[_codepoints(text)] = True
        return cls(np.flatnonzero(seen).astype("<u4").tobytes().decode("utf-32-le", "surrogatepass"))

    @property
    def vocab_size(self) -> int:
        return len(self.chars) + 1

    def encode_arrays(self, text: str) -> Arrays:
        codepoints = _codepoints(text)
        # unseen code points hold UNKNOWN_ID (0), which covers the character it replaces: its own UTF-8 length
        ids = self._table[codepoints]
        return ids, _utf8_length_table()[codepoints], np.ones(ids.size, dtype=np.uint8)

    def encode_ids_many(self, texts: Sequence[str]) -> list[np.ndarray]:
        # the table's dtype, not widened: the train split narrows them to its own anyway
        return _on_all_cores(lambda text: self._table[_codepoints(text)], texts)

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        ids = _as_int_array(ids)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ConfigError(f"char tokenizer: ids must be in [0, {self.vocab_size})")
        table = np.concatenate([[ord(self.UNKNOWN_TEXT)], self._sorted_codepoints]).astype("<u4")
        return table[ids].tobytes().decode("utf-32-le", "surrogatepass")

    def unseen_in(self, ids: np.ndarray) -> int:
        return int(np.count_nonzero(ids == self.UNKNOWN_ID))

    def _payload(self) -> dict:
        return {"chars": self.chars}


def _narrowest(values: np.ndarray) -> np.ndarray:
    """Non-negative counts in uint8 when they fit (every token of GPT-2's covers at most 128 bytes), else int32."""
    return values.astype(np.uint8 if values.max(initial=0) <= np.iinfo(np.uint8).max else np.int32)


def _is_char_start(byte_values: np.ndarray) -> np.ndarray:
    return (byte_values & 0xC0) != 0x80  # UTF-8 continuation bytes are 10xxxxxx


class BytesTokenizer(Tokenizer):
    """The 256 byte values of the UTF-8 text: nothing is unknown, and nothing to fit."""

    name = "bytes"
    needs_fitting = False

    @property
    def vocab_size(self) -> int:
        return 256

    def encode_arrays(self, text: str) -> Arrays:
        values = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
        return values, np.ones(values.size, dtype=np.uint8), _is_char_start(values).view(np.uint8)

    def encode_ids_many(self, texts: Sequence[str]) -> list[np.ndarray]:
        return _on_all_cores(lambda text: np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8), texts)

    def token_lengths(self) -> tuple[np.ndarray, np.ndarray]:
        return np.ones(256, dtype=np.int64), _is_char_start(np.arange(256, dtype=np.uint8)).astype(np.int64)

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        # A window can start or end inside a character; those partial characters decode as U+FFFD.
        return bytes(_as_int_array(ids).astype(np.uint8).tobytes()).decode("utf-8", errors="replace")

    def _payload(self) -> dict:
        return {}


@functools.cache
def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the printable character standing for each byte -> the byte."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    byte_values, shifted = printable[:], 0
    chars = printable[:]
    for b in range(256):
        if b not in printable:
            byte_values.append(b)
            chars.append(256 + shifted)
            shifted += 1
    return {chr(c): b for b, c in zip(byte_values, chars, strict=True)}


class ByteLevelBPETokenizer(Tokenizer):
    """A Hugging Face `tokenizers` byte-level BPE: trained here (name "bpe") or GPT-2's (name "gpt2")."""

    needs_fitting = False  # set per instance

    def __init__(self, hf_tokenizer, name: str):
        self.name = name
        self.needs_fitting = name == "bpe"
        self.hf = hf_tokenizer
        self._token_bytes, self._token_chars = self._tables()

    def _tables(self) -> tuple[np.ndarray, np.ndarray]:
        """Bytes and character starts of every vocabulary entry: a token always stands for the same bytes, so
        the per-token counts are two table lookups."""
        alphabet = _byte_level_alphabet()
        token_bytes = np.zeros(self.vocab_size, dtype=np.int64)
        token_chars = np.zeros(self.vocab_size, dtype=np.int64)
        for token, index in self.hf.get_vocab(with_added_tokens=True).items():
            if all(c in alphabet for c in token):
                raw = np.array([alphabet[c] for c in token], dtype=np.uint8)
            else:  # an added token is stored as its own text
                raw = np.frombuffer(token.encode("utf-8"), dtype=np.uint8)
            token_bytes[index] = raw.size
            token_chars[index] = int(_is_char_start(raw).sum())
        return token_bytes, token_chars

    @property
    def vocab_size(self) -> int:
        return self.hf.get_vocab_size(with_added_tokens=True)

    def token_lengths(self) -> tuple[np.ndarray, np.ndarray]:
        # what bits per byte counts for ids encoded elsewhere (llm.c's token shards: tinygpt/data/shards.py)
        return self._token_bytes.copy(), self._token_chars.copy()

    def _arrays(self, encoding) -> Arrays:
        ids = np.asarray(encoding.ids, dtype=np.int32)
        return ids, self._narrow_bytes[ids], self._narrow_chars[ids]

    @functools.cached_property
    def _narrow_bytes(self) -> np.ndarray:
        return _narrowest(self._token_bytes)

    @functools.cached_property
    def _narrow_chars(self) -> np.ndarray:
        return _narrowest(self._token_chars)

    def encode_arrays(self, text: str) -> Arrays:
        return self._arrays(self.hf.encode(text, add_special_tokens=False))

    def encode_many_arrays(self, texts: Sequence[str]) -> list[Arrays]:
        # encode_batch runs on all cores in Rust: one call for all the documents of a split.
        return [self._arrays(e) for e in self.hf.encode_batch(list(texts), add_special_tokens=False)]

    def encode_ids_many(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [np.asarray(e.ids, dtype=np.int64) for e in self.hf.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: Sequence[int] | torch.Tensor) -> str:
        return self.hf.decode(_as_int_array(ids).tolist(), skip_special_tokens=False)

    def _payload(self) -> dict:
        return {"hf": json.loads(self.hf.to_str())}


def _new_byte_level_hf(model):
    from tokenizers import Tokenizer as HFTokenizer
    from tokenizers import decoders, pre_tokenizers

    hf = HFTokenizer(model)
    # GPT-2's pre-tokenizer (its regex, no prefix space) and decoder: the text round-trips exactly.
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    return hf


def train_bpe(texts: Iterable[str], vocab_size: int = 2048) -> ByteLevelBPETokenizer:
    """Byte-level BPE trained on texts only, read as a stream (the trainer keeps word counts, not the texts). The
    initial alphabet is all 256 bytes, so any text is encodable; training is deterministic (same texts, same
    merges)."""
    from tokenizers import models, pre_tokenizers, trainers

    hf = _new_byte_level_hf(models.BPE())
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
        show_progress=False,
    )
    hf.train_from_iterator(texts, trainer=trainer)
    return ByteLevelBPETokenizer(hf, "bpe")


def load_gpt2(encoder_json: str | Path, vocab_bpe: str | Path) -> ByteLevelBPETokenizer:
    from tokenizers import models

    return ByteLevelBPETokenizer(_new_byte_level_hf(models.BPE.from_file(str(encoder_json), str(vocab_bpe))), "gpt2")


def tokenizer_from_json(text: str) -> Tokenizer:
    payload = json.loads(text)
    kind = payload.get("kind")
    if kind not in TOKENIZERS:
        raise DataError(f"tokenizer JSON: unknown kind {kind!r}; expected one of {', '.join(TOKENIZERS)}")
    return TOKENIZERS[kind].from_json(payload)


def load_tokenizer(directory: str | Path) -> Tokenizer:
    path = Path(directory)
    path = path / TOKENIZER_FILE if path.is_dir() else path
    return tokenizer_from_json(path.read_text(encoding="utf-8"))


def build_tokenizer(config: TokenizerConfig, fit_texts: Iterable[str], root: DataRoot) -> Tokenizer:
    """The tokenizer a `data.tokenizer` config asks for: char and bpe are fitted on fit_texts (the train split
    only); gpt2 reads encoder.json and vocab.bpe from <root>/gpt2/ (downloaded there if missing)."""
    if config.name not in TOKENIZERS:
        raise DataError(f"data.tokenizer.name={config.name!r}: unknown tokenizer; choose one of {list(TOKENIZERS)}")
    return TOKENIZERS[config.name].build(config, fit_texts, root)


def _gpt2(config: TokenizerConfig, fit_texts: Iterable[str], root: DataRoot) -> Tokenizer:
    from tinygpt.data.download import ensure_files
    from tinygpt.data.sources import GPT2_FILES

    encoder_json, vocab_bpe = ensure_files(root, GPT2_FILES, "GPT-2's tokenizer")
    return load_gpt2(encoder_json, vocab_bpe)


def _hf_from_json(kind: str) -> Callable[[dict], Tokenizer]:
    def read(payload: dict) -> Tokenizer:
        from tokenizers import Tokenizer as HFTokenizer

        return ByteLevelBPETokenizer(HFTokenizer.from_str(json.dumps(payload["hf"])), kind)

    return read


@dataclass
class TokenizerConfig:
    """data.tokenizer (a field of tinygpt/data/config.py's DataConfig), beside the registry its name is checked
    against on construction (``TOKENIZERS``, below)."""

    name: str = "char"  # a name in tinygpt/data/tokenizers.py's TOKENIZERS
    vocab_size: int | None = None  # bpe only: the size to train to (null: 2048)
    # bpe only: the train split's bytes it is fitted on; a larger split gives a seeded sample of its chunks
    # (data.split_seed) of about this size (null: 256 MiB; 0: the whole split)
    fit_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.name not in TOKENIZERS:
            raise DataError(f"data.tokenizer.name={self.name!r}: unknown tokenizer; choose one of {list(TOKENIZERS)}")
        if self.name == "bpe":
            if self.vocab_size is None:
                self.vocab_size = DEFAULT_BPE_VOCAB
            if self.fit_bytes is None:
                self.fit_bytes = DEFAULT_BPE_FIT_BYTES
            if self.fit_bytes < 0:
                raise DataError(
                    f"data.tokenizer.fit_bytes={self.fit_bytes!r}: the bytes of the train split BPE is fitted on, "
                    "an integer >= 0 (0: the whole split)"
                )
            if self.vocab_size < 257:
                raise DataError(
                    f"data.tokenizer.vocab_size={self.vocab_size!r}: byte-level BPE starts from the 256 byte "
                    "values, so the vocabulary must be an integer of at least 257"
                )
        elif self.fit_bytes is not None:
            raise DataError(
                f"data.tokenizer.fit_bytes={self.fit_bytes!r}: only bpe is fitted on a sample; {self.name} "
                + ("reads the whole train split" if self.name == "char" else "is fixed in advance")
            )
        elif self.vocab_size is not None:
            raise DataError(
                f"data.tokenizer.vocab_size={self.vocab_size!r}: only bpe takes a vocab_size; {self.name}'s is "
                "fixed by its definition (char: the fit text's characters + 1, bytes: 256, gpt2: 50257)"
            )

    @property
    def needs_fitting(self) -> bool:
        """char and bpe learn their vocabulary from the fit text; bytes and gpt2 are fixed in advance."""
        return TOKENIZERS[self.name].needs_fitting


@dataclass(frozen=True)
class TokenizerKind:
    """One `data.tokenizer.name`: how to build it for a run, how to read it back from tokenizer.json, and
    whether it learns its vocabulary from the fit text (then the splits cannot be cut in its tokens)."""

    build: Callable[[TokenizerConfig, Iterable[str], DataRoot], Tokenizer]
    from_json: Callable[[dict], Tokenizer]
    needs_fitting: bool


# data.tokenizer.name's names and their kinds: TokenizerConfig checks against the keys, build_tokenizer and
# tokenizer_from_json dispatch on them. Adding a tokenizer: its class above, an entry here, conf/data/tokenizer/.
TOKENIZERS: dict[str, TokenizerKind] = {
    "char": TokenizerKind(
        lambda c, texts, root: CharTokenizer.fit(texts),
        lambda payload: CharTokenizer(payload["chars"]),
        needs_fitting=True,
    ),
    "bytes": TokenizerKind(
        lambda c, texts, root: BytesTokenizer(), lambda payload: BytesTokenizer(), needs_fitting=False
    ),
    "bpe": TokenizerKind(
        lambda c, texts, root: train_bpe(texts, c.vocab_size), _hf_from_json("bpe"), needs_fitting=True
    ),
    "gpt2": TokenizerKind(_gpt2, _hf_from_json("gpt2"), needs_fitting=False),
}
