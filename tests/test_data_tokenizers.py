"""Tokenizers: round trips, exact byte/char offsets, vocabularies fitted on the train split only, gpt2."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from tinygpt.data import (
    BytesTokenizer,
    CharTokenizer,
    DataError,
    TextDataModule,
    load_tokenizer,
    tokenizer_from_json,
)
from tinygpt.data.tokenizers import load_gpt2, train_bpe

DATA = os.environ.get("TINYGPT_DATA")
requires_data = pytest.mark.skipif(not DATA, reason="TINYGPT_DATA is not set (CI sets it to ../shared/data)")

FIT = "The Time Traveller (for so it will be convenient to speak of him) was expounding a recondite matter.\n" * 20
MIXED = "naïve café — “quotes”, emoji ✅🔗, tabs\tand\r\nCRLF, 日本語, and plain ASCII text.\n"


def gpt2():
    return load_gpt2(Path(DATA) / "gpt2/encoder.json", Path(DATA) / "gpt2/vocab.bpe")


@functools.cache
def all_tokenizers():
    made = {
        "char": CharTokenizer.fit(FIT + MIXED),
        "bytes": BytesTokenizer(),
        "bpe": train_bpe([FIT, MIXED], vocab_size=300),
    }
    if DATA:
        made["gpt2"] = gpt2()
    return made


def tokenizer_of(kind: str):
    """The tokenizer named ``kind`` of ``all_tokenizers``; gpt2's test is skipped without the data root."""
    tokenizers = all_tokenizers()
    if kind not in tokenizers:
        pytest.skip("gpt2 needs TINYGPT_DATA (CI sets it)")
    return tokenizers[kind]


@pytest.mark.parametrize("kind", ["char", "bytes", "bpe", "gpt2"])
def test_round_trip_and_offsets(kind):
    tok = tokenizer_of(kind)
    for text in (FIT, MIXED, "", "a"):
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        assert tok.decode(torch.tensor(ids)) == text
        ids_t, token_bytes, token_chars = tok.encode_with_offsets(text)
        assert ids_t.dtype == torch.long and ids_t.tolist() == ids
        assert int(token_bytes.sum()) == len(text.encode("utf-8"))  # what bits per byte divides by
        assert int(token_chars.sum()) == len(text)
        assert max(ids, default=0) < tok.vocab_size


@pytest.mark.parametrize("kind", ["char", "bytes", "bpe", "gpt2"])
def test_encode_arrays_are_the_offsets_in_the_tokenizers_narrowest_dtypes(kind):
    tok = tokenizer_of(kind)
    arrays = tok.encode_arrays(MIXED + FIT)
    offsets = tok.encode_with_offsets(MIXED + FIT)
    assert all(a.tolist() == o.tolist() for a, o in zip(arrays, offsets, strict=True))
    # no int64 on the way to a prepared folder: a character's or a byte's counts are bytes (a token of GPT-2's covers
    # at most 128 bytes, a fitted BPE's here fewer than 256)
    assert all(a.dtype.itemsize <= 4 for a in arrays) and arrays[1].dtype == arrays[2].dtype == np.uint8
    assert [a.tolist() for a in tok.encode_many_arrays([MIXED, FIT])[1]] == [a.tolist() for a in tok.encode_arrays(FIT)]


def test_a_bpe_token_longer_than_255_bytes_is_counted_in_full():
    tok = train_bpe([("a" * 1024 + " ") * 4], vocab_size=270)  # merges double "a": tokens of 512 and 1024 bytes
    ids, token_bytes, token_chars = tok.encode_arrays("a" * 1024)
    assert token_bytes.dtype == np.int32 and token_bytes.tolist() == [1024] and token_chars.tolist() == [1024]


@pytest.mark.parametrize("kind", ["char", "bytes", "bpe", "gpt2"])
def test_json_and_save_round_trip(kind, tmp_path):
    tok = tokenizer_of(kind)
    restored = tokenizer_from_json(tok.to_json())
    loaded = load_tokenizer(tok.save(tmp_path / kind).parent)
    for other in (restored, loaded):
        assert other.name == tok.name and other.vocab_size == tok.vocab_size
        assert other.encode(MIXED + FIT) == tok.encode(MIXED + FIT)
        assert other.encode_with_offsets(MIXED)[1].tolist() == tok.encode_with_offsets(MIXED)[1].tolist()


def test_char_unknown_id_covers_the_replaced_characters_bytes():
    tok = CharTokenizer.fit("abc ")
    ids, token_bytes, token_chars = tok.encode_with_offsets("a é✅😀 c")
    assert tok.unseen_count("a é✅😀 c") == 3
    assert ids.tolist() == [2, 1, 0, 0, 0, 1, 4]  # id 0 = unseen, 1.. = " abc" in code point order
    assert token_bytes.tolist() == [1, 1, 2, 3, 4, 1, 1]
    assert token_chars.tolist() == [1] * 7
    assert tok.decode(ids) == "a \ufffd\ufffd\ufffd c"


def test_byte_level_tokens_count_character_starts():
    tok = BytesTokenizer()
    _, token_bytes, token_chars = tok.encode_with_offsets("é✅")
    assert token_bytes.tolist() == [1] * 5
    assert token_chars.tolist() == [1, 0, 1, 0, 0]


def test_bpe_is_deterministic_and_starts_from_all_bytes():
    a, b = train_bpe([FIT, MIXED], vocab_size=400), train_bpe([FIT, MIXED], vocab_size=400)
    assert a.to_json() == b.to_json()
    assert 256 < a.vocab_size <= 400  # stops early when the text has no more pairs to merge
    assert a.decode(a.encode("Ωmega ₿ never seen")) == "Ωmega ₿ never seen"  # no unknowns


def write_book(root: Path, dev_only: str, n_chars: int = 6000) -> None:
    """A book whose dev slice (test_fraction=0.1, dev_fraction=0.1) is filled with dev_only, repeated."""
    base = (FIT * (n_chars // len(FIT) + 1))[:n_chars]
    dev_end = int(n_chars * 0.9)
    dev_start = int(dev_end * 0.9)
    dev = (dev_only * n_chars)[: dev_end - dev_start]
    (root / "book.txt").write_text(base[:dev_start] + dev + base[dev_end:], encoding="utf-8")


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_vocabulary_is_fitted_on_the_train_split_only(tmp_path, kind):
    write_book(tmp_path, "ЖЖЖ ЖЖЖЖ ЖЖ ")  # appears in the dev slice only
    data = {"root": str(tmp_path), "name": "textfile", "path": "book.txt", "tokenizer": {"name": kind}}
    if kind == "bpe":
        data["tokenizer"]["vocab_size"] = 600
    dm = TextDataModule({**data, "test_fraction": 0.1, "dev_fraction": 0.1}, context_length=16, seed=0)
    dm.setup()
    dev_text = dm.tokenizer.decode(dm.dev_split.ids)
    assert "Ж" not in dm.tokenizer.decode(dm.train_split.ids)
    if kind == "char":
        assert "Ж" not in dm.tokenizer.chars
        assert dm.describe()["unseen_dev_chars"] == dev_text.count("\ufffd") > 0
    else:
        zhe = "Ж".encode()
        vocab_bytes = [dm.tokenizer.decode([i]).encode("utf-8", "surrogatepass") for i in range(dm.vocab_size)]
        assert not any(zhe in token for token in vocab_bytes)  # a BPE fitted on dev would have merged it
        assert "Ж" in dev_text  # byte-level: still encodable, nothing unknown
        assert dm.describe()["unseen_dev_chars"] == 0


def test_wrong_kind_of_given_tokenizer_is_refused(tmp_path):
    (tmp_path / "book.txt").write_text(FIT, encoding="utf-8")
    with pytest.raises(DataError, match="bytes tokenizer"):
        TextDataModule(
            {"root": str(tmp_path), "name": "textfile", "path": "book.txt"},
            context_length=8,
            seed=0,
            tokenizer=BytesTokenizer(),
        )


@requires_data
def test_gpt2_hello_world():
    assert gpt2().encode("Hello world") == [15496, 995]
    assert gpt2().vocab_size == 50257


def _bpe_folder(tmp_path: Path, fit_bytes: int | None, split_seed: int = 0) -> tuple[str, list[str]]:
    """(the fitted tokenizer's JSON, the train documents' texts) of a 40-document folder corpus under bpe."""
    import numpy as np

    from tinygpt.data import build_datamodule
    from tinygpt.data.config import DataConfig
    from tinygpt.data.tokenizers import TokenizerConfig

    folder = tmp_path / "docs"
    if not folder.exists():
        folder.mkdir()
        rng = np.random.default_rng(0)
        words = ["".join(rng.choice(list("abcdefghij"), size=rng.integers(2, 7))) for _ in range(300)]
        for i in range(40):
            (folder / f"d{i:02d}.txt").write_text(" ".join(rng.choice(words, size=300)) + "\n")
    tokenizer = TokenizerConfig(name="bpe", vocab_size=400, fit_bytes=fit_bytes)
    config = DataConfig(
        name="textdir",
        corpus="dir",
        path=str(folder),
        glob="*.txt",
        dev="none",
        test_k=2,
        split_seed=split_seed,
        tokenizer=tokenizer,
    )
    dm = build_datamodule(config, context_length=16, seed=0)
    dm.setup("fit")
    train = [piece.path.read_text() for piece in dm.prepared.plan.train]
    return dm.tokenizer.to_json(), train


def test_bpe_is_fitted_on_a_seeded_sample_of_a_train_split_larger_than_fit_bytes(tmp_path):
    """data.tokenizer.fit_bytes: each chunk (here a document) kept with probability fit_bytes / the split's bytes,
    drawn from data.split_seed's stream 2; a split no larger than fit_bytes (the default's case for every corpus
    tinygpt's results come from) is fitted whole, as before."""
    import numpy as np

    whole, train = _bpe_folder(tmp_path, None)
    assert _bpe_folder(tmp_path, 0)[0] == whole == train_bpe(train, 400).to_json()
    split_bytes = sum(len(t.encode()) for t in train)
    sampled, _ = _bpe_folder(tmp_path, split_bytes // 4)
    rng = np.random.default_rng(np.random.SeedSequence([0, 2]))
    kept = [t for t in train if rng.random() < (split_bytes // 4) / split_bytes]
    assert 4 < len(kept) < 16 and sampled == train_bpe(kept, 400).to_json() != whole
    assert _bpe_folder(tmp_path, split_bytes // 4)[0] == sampled  # the same on every run


@pytest.mark.parametrize(
    ("tokenizer", "message"),
    [
        ({"name": "char", "fit_bytes": 1000}, r"^data\.tokenizer\.fit_bytes=1000: only bpe is fitted on a sample"),
        ({"name": "bpe", "fit_bytes": -1}, r"^data\.tokenizer\.fit_bytes=-1: the bytes of the train split"),
    ],
)
def test_fit_bytes_is_refused_where_it_would_be_ignored_or_is_negative(tokenizer, message):
    from tinygpt.data.errors import DataError
    from tinygpt.data.tokenizers import TokenizerConfig

    with pytest.raises(DataError, match=message):
        TokenizerConfig(**tokenizer)


def test_bpe_fits_a_sample_only_past_the_documented_256_mib():
    """fit_bytes's default is docs/data.md's 256 MiB: every committed BPE result was fitted on its whole train split."""
    from conftest import REPO

    from tinygpt.data.tokenizers import TokenizerConfig

    assert TokenizerConfig(name="bpe").fit_bytes == 256 * 2**20
    assert "(256 MiB by" in (REPO / "docs" / "data.md").read_text()
