"""split_unit=tokens streamed (tinygpt/data/token_cuts.py): the rest encoded once, a chunk at a time, into a scratch
file of ids, then cut; the train split and the dev tail are what slicing the whole encoding of each document gave.

What must hold: the same ids, counts, documents and dev arrays as cutting the encoding of the whole text (how 000's
committed results were made), with the documents read in many chunks and the ids read back in many blocks; no
scratch file left behind.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import requires_data

from tinygpt.data import TextDataModule, token_cuts
from tinygpt.data import encoded as encoded_module
from tinygpt.data.documents import read_chunks, read_piece
from tinygpt.data.encoded import encode_segments
from tinygpt.data.errors import DataError
from tinygpt.data.tokenizers import CharTokenizer


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    monkeypatch.setenv("TINYGPT_PREPARED", str(tmp_path / "prepared"))
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(5):  # UTF-8 of one to four bytes a character, lines the chunks can be cut at
        line = f"Line {i}: the naïve café ✅ 😀 fox.\nNext"
        (folder / f"doc{i}.txt").write_text(line * (30 + 7 * i))
    return folder


def setup(corpus, tokenizer: str, **data) -> TextDataModule:
    config = {
        "name": "textdir",
        "corpus": "dir",
        "path": str(corpus),
        "glob": "*.txt",
        "split_by": "choice",
        "test_k": 1,
        "split_unit": "tokens",
        "tokenizer": {"name": tokenizer},
        **data,
    }
    dm = TextDataModule(config, context_length=8, seed=0)
    dm.setup()
    return dm


@pytest.mark.parametrize(
    "tokenizer, data",
    [
        ("bytes", {"dev": "tail", "dev_fraction": 0.4, "fraction": 0.6}),
        ("bytes", {"dev": "tail", "dev_fraction": 0.55, "fraction": 1.0}),
        ("bytes", {"dev": "documents", "dev_k": 2, "fraction": 0.7}),
        ("bytes", {"dev": "none", "fraction": 0.45}),
        pytest.param("gpt2", {"dev": "tail", "dev_fraction": 0.4, "fraction": 0.6}, marks=requires_data),
    ],
)
def test_a_streamed_cut_is_the_cut_of_the_whole_encoding(corpus, tokenizer, data, monkeypatch):
    monkeypatch.setattr(read_chunks, "__defaults__", (256,))  # each document read in many chunks ...
    monkeypatch.setattr(encoded_module, "PART_CHARS", 64)
    monkeypatch.setattr(token_cuts, "BLOCK", 37)  # ... and the ids read back in many blocks
    dm = setup(corpus, tokenizer, **data)
    plan, tok = dm.prepared.plan, dm.tokenizer
    rest = encode_segments(tok, [(p.document, read_piece(p)) for p in plan.fit_full])  # the whole, as before
    n_fit = int(len(rest) * (1 - data["dev_fraction"])) if data["dev"] == "tail" else len(rest)
    fit_full = rest.slice(0, n_fit)
    train = fit_full.slice(0, int(len(fit_full) * data["fraction"]))
    assert np.array_equal(np.asarray(dm.train_split.tokens, dtype=np.int64), train.ids.numpy())
    assert (dm.train_split.chars, dm.train_split.bytes) == (train.chars, train.bytes)
    assert dm.train_split.documents == train.documents and len(train.documents) > 1
    assert (dm.prepared.fit_full_chars, dm.prepared.fit_full_bytes) == (fit_full.chars, fit_full.bytes)
    if data["dev"] == "none":
        assert dm.dev_split is None
        return
    if data["dev"] == "tail":
        dev = rest.slice(n_fit, len(rest))
    else:
        dev = encode_segments(tok, [(p.document, read_piece(p)) for p in plan.dev])
    assert len(dev.documents) > 1  # the dev split crosses a document boundary, inside a block
    for field in ("ids", "token_bytes", "token_chars", "token_doc"):
        assert torch.equal(getattr(dm.dev_split, field).long(), getattr(dev, field)), field
    assert dm.dev_split.documents == dev.documents and (dm.dev_split.chars, dm.dev_split.bytes) == (
        dev.chars,
        dev.bytes,
    )
    prepared_root = dm.prepared.folder.parent
    assert not [p.name for p in prepared_root.iterdir() if p.name.startswith(".")]  # no scratch file left


def test_a_tokenizer_without_fixed_lengths_cannot_be_cut_from_ids():
    with pytest.raises(DataError, match="the char tokenizer has no fixed bytes per id"):
        CharTokenizer.fit("abc").token_lengths()


def test_a_range_of_tokens_holds_the_documents_it_touches_and_no_more():
    layout = token_cuts._Documents(["a", "b", "empty", "c"], [0, 10, 20, 20])
    assert layout.between(0, 10) == (0, 0)  # ends where b starts: b is not in it
    assert layout.between(9, 11) == (0, 1) and layout.between(15, 25) == (1, 3)
    assert layout.of(20) == 3  # a document with no tokens holds none; the range across it still lists it


def test_the_scratch_ids_are_read_back_a_block_at_a_time(corpus, monkeypatch):
    """Memory holds a block of the rest's ids, never all of them: a map of the scratch file read to its end kept
    every page in the resident set (4.4 GB for a 2 GiB corpus of bytes), so it is read with pread, a block a call."""
    monkeypatch.setattr(token_cuts, "BLOCK", 100)
    reads: list[int] = []
    pread = token_cuts.os.pread

    def counted(fd, length, offset):
        reads.append(length)
        return pread(fd, length, offset)

    monkeypatch.setattr(token_cuts.os, "pread", counted)
    dm = setup(corpus, "bytes", dev="tail", dev_fraction=0.2, fraction=1.0)
    assert len(dm.train_split) > 10 * 100 and max(reads) == 100 * 2  # uint16 ids
    assert sum(reads) >= 2 * len(dm.train_split)  # the train split's ids came through it
