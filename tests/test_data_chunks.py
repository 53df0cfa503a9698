"""A long document is read, fitted on and encoded a chunk at a time (tinygpt/data/documents.py's read_chunks), and
that changes no token: every tokenizer encodes the chunks into exactly the whole document's ids and offsets, and a
run over a corpus prepared in chunks trains on the same tokens as one prepared whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tinygpt.common.progress import Progress
from tinygpt.data import TextDataModule
from tinygpt.data import documents as documents_module
from tinygpt.data.documents import read_chunks, scan_document, whole
from tinygpt.data.encoded import encode_segments
from tinygpt.data.root import resolve_data_root
from tinygpt.data.tokenizers import CharTokenizer, TokenizerConfig, build_tokenizer, train_bpe

# newlines between every kind of neighbour: spaces and tabs before or after them, blank lines, Unicode spaces
# (no-break U+00A0, ideographic U+3000), CJK and accented letters, digits, punctuation and contractions
LINES = [
    "It's the Time Traveller's 3rd trip. 'Tis odd!",
    "  indented line\twith a tab",
    "trailing spaces   ",
    "",
    "\u3000ideographic space first",
    "no-break\u00a0",
    "\u00a0space then letters",
    "数字 123 and 45.6%  ",
    "naïve café — «quotes»",
    "ok",
]
TEXT = "\n".join(LINES * 40) + "\nthe end"


@pytest.fixture
def document(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text(TEXT, encoding="utf-8")
    return scan_document("long.txt", path)


@pytest.fixture(scope="module")
def gpt2():
    return build_tokenizer(TokenizerConfig(name="gpt2"), [], resolve_data_root(None))


def fitted(name: str, gpt2):
    """The tokenizer ``name`` fitted on TEXT (GPT-2's is fixed: the module's one)."""
    if name == "gpt2":
        return gpt2
    if name == "bpe":
        return train_bpe([TEXT], vocab_size=400)
    return build_tokenizer(TokenizerConfig(name=name), [TEXT], resolve_data_root(None))


def test_the_chunks_are_the_text_and_each_ends_where_no_token_crosses(document):
    chunks = list(read_chunks(whole(document), chunk_bytes=64))
    assert len(chunks) > 20 and "".join(chunks) == TEXT
    for chunk in chunks[:-1]:
        assert chunk.endswith("\n") and not chunk[-2].isspace()
    for chunk in chunks[1:]:
        assert not chunk[0].isspace()
    assert list(read_chunks(whole(document))) == [TEXT]  # a piece within the chunk size: one read


@pytest.mark.parametrize("tokenizer", ["char", "bytes", "bpe", "gpt2"])
def test_encoding_the_chunks_gives_the_whole_documents_tokens(document, tokenizer, gpt2):
    tok = fitted(tokenizer, gpt2)
    whole_encoding = encode_segments(tok, [("long.txt", TEXT)])
    parts = [encode_segments(tok, [("long.txt", chunk)]) for chunk in read_chunks(whole(document), chunk_bytes=64)]
    for field in ("ids", "token_bytes", "token_chars"):
        assert torch.equal(torch.cat([getattr(p, field) for p in parts]), getattr(whole_encoding, field)), field


@pytest.mark.parametrize("tokenizer", ["char", "bytes", "bpe", "gpt2"])
def test_a_chunk_encoded_in_parts_on_all_cores_has_the_whole_chunks_ids(tokenizer, gpt2, monkeypatch):
    """encode_train_chunk: the chunk cut where read_chunks cuts (split_text) and the parts encoded together (one
    encode_batch across the cores for the Hugging Face tokenizers), concatenated: the ids of the chunk whole."""
    from tinygpt.data import encoded as encoded_module
    from tinygpt.data.documents import split_text
    from tinygpt.data.encoded import encode_train_chunk

    parts = split_text(TEXT, 40)
    assert len(parts) > 20 and "".join(parts) == TEXT
    assert all(p.endswith("\n") and not p[-2].isspace() for p in parts[:-1])
    assert all(not p[0].isspace() for p in parts[1:])
    assert split_text("a b c d e f", 2) == ["a b c d e f"]  # no safe newline: one part
    tok = fitted(tokenizer, gpt2)
    monkeypatch.setattr(encoded_module, "PART_CHARS", 40)
    chunk = encode_train_chunk(tok, "long.txt", TEXT)
    whole_encoding = encode_segments(tok, [("long.txt", TEXT)])
    assert np.array_equal(chunk.ids, whole_encoding.ids.numpy())
    assert (chunk.chars, chunk.bytes) == (whole_encoding.chars, whole_encoding.bytes)


def test_a_tokenizer_fitted_on_the_chunks_is_the_one_fitted_on_the_whole(document):
    chunks = list(read_chunks(whole(document), chunk_bytes=64))
    assert CharTokenizer.fit(iter(chunks)).chars == CharTokenizer.fit(TEXT).chars
    assert CharTokenizer.fit(iter(chunks)).chars == "".join(sorted(set(TEXT)))


def test_a_stretch_without_a_safe_newline_is_read_on_until_one_comes(tmp_path):
    path = tmp_path / "wide.txt"
    path.write_text("x" * 500 + "\ny" * 3 + " \n" * 50 + "z", encoding="utf-8")
    chunks = list(read_chunks(whole(scan_document("wide.txt", path)), chunk_bytes=64))
    assert "".join(chunks) == path.read_text(encoding="utf-8")
    assert len(chunks[0]) > 500  # no newline in the first 500 characters: the chunk grew past chunk_bytes


def test_a_corpus_prepared_in_chunks_trains_on_the_same_tokens(tmp_path, monkeypatch):
    """The BPE fitted on chunks of 256 bytes cut into parts of 64 characters, and the text encoded in them, against
    the text whole: the same merges and the same ids."""
    from tinygpt.data import datamodule as datamodule_module
    from tinygpt.data import encoded as encoded_module

    (tmp_path / "book.txt").write_text(TEXT * 3, encoding="utf-8")
    config = {"root": str(tmp_path), "name": "textfile", "path": "book.txt", "tokenizer": {"name": "bpe"}}

    def train_ids(prepared: str, chunk_bytes: int, part_chars: int) -> np.ndarray:
        monkeypatch.setenv("TINYGPT_PREPARED", str(tmp_path / prepared))
        monkeypatch.setattr(documents_module, "CHUNK_BYTES", chunk_bytes)
        monkeypatch.setattr(read_chunks, "__defaults__", (chunk_bytes,))
        monkeypatch.setattr(datamodule_module, "PART_CHARS", part_chars)  # the fit's parts
        monkeypatch.setattr(encoded_module, "PART_CHARS", part_chars)  # the encoding's
        dm = TextDataModule(config, context_length=16, seed=0)
        dm.setup()
        return np.asarray(dm.train_split.tokens), dm.tokenizer.to_json()

    chunked, chunked_tokenizer = train_ids("chunked", 256, 64)
    whole_ids, whole_tokenizer = train_ids("whole", 1 << 25, 1 << 25)
    assert chunked_tokenizer == whole_tokenizer and np.array_equal(chunked, whole_ids)


@pytest.mark.parametrize("tokenizer", ["char", "gpt2"])
def test_the_dev_split_encoded_in_chunks_is_the_whole_dev_split_encoded(tmp_path, monkeypatch, tokenizer):
    """Dev documents read in chunks of 256 bytes and encoded in batches of them: the same ids, bytes, characters and
    documents as the dev documents encoded whole, a document cut into chunks still one document."""
    from tinygpt.data import datamodule as datamodule_module

    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(12):
        (folder / f"d{i:02d}.txt").write_text(TEXT[: 300 + 97 * i], encoding="utf-8")
    monkeypatch.setenv("TINYGPT_PREPARED", str(tmp_path / "prepared"))
    monkeypatch.setattr(read_chunks, "__defaults__", (256,))
    monkeypatch.setattr(datamodule_module, "SCORED_BATCH_CHARS", 1000)  # a batch: about four chunks
    monkeypatch.setattr(datamodule_module, "PART_CHARS", 100)  # each chunk cut in parts
    config = {"name": "textdir", "corpus": "dir", "path": str(folder), "glob": "*.txt", "split_by": "hash"}
    config |= {"dev": "documents", "dev_fraction": 0.5, "test_fraction": 0.1, "tokenizer": {"name": tokenizer}}
    dm = TextDataModule(config, context_length=16, seed=0)
    dm.setup()
    whole = encode_segments(dm.tokenizer, [(p.document, p.path.read_text()) for p in dm.prepared.plan.dev])
    dev = dm.dev_split
    assert len(whole.documents) >= 4 and dev.documents == whole.documents
    for field in ("ids", "token_bytes", "token_chars", "token_doc"):
        assert torch.equal(getattr(dev, field), getattr(whole, field)), field


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads Linux's list of the process's mappings")
def test_the_held_out_split_is_scored_from_a_mapped_file_of_its_chunks_that_nothing_else_can_open(
    tmp_path, monkeypatch
):
    """Held-out documents read in chunks of 256 bytes: the scoring windows hold the ids, bytes, characters and
    documents of the held-out documents encoded whole, from files that are mapped and already deleted."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(12):
        (folder / f"d{i:02d}.txt").write_text(TEXT[: 300 + 97 * i], encoding="utf-8")
    prepared = tmp_path / "prepared"
    monkeypatch.setenv("TINYGPT_PREPARED", str(prepared))
    monkeypatch.setattr(read_chunks, "__defaults__", (256,))
    config = {"name": "textdir", "corpus": "dir", "path": str(folder), "glob": "*.txt", "split_by": "hash"}
    dm = TextDataModule(config | {"test_fraction": 0.4}, context_length=16, seed=0)
    dm.setup()
    held_out = dm.test_dataloader().dataset
    whole = encode_segments(dm.tokenizer, [(p.document, p.path.read_text()) for p in dm.prepared.plan.test])
    assert len(whole.documents) >= 3 and dm.test_documents == whole.documents
    for mine, theirs in [("ids", "ids"), ("token_bytes", "token_bytes"), ("token_chars", "token_chars")]:
        assert torch.equal(getattr(held_out, mine), getattr(whole, theirs)), mine
    assert torch.equal(held_out.token_doc, whole.token_doc)
    scratch = [line for line in Path("/proc/self/maps").read_text().splitlines() if ".scoring." in line]
    assert len(scratch) >= 4 and all(line.endswith("(deleted)") for line in scratch)
    assert not any(p.name.startswith(".scoring.") for p in prepared.iterdir())


def test_an_encoding_says_how_far_it_is_and_how_fast():
    now = [0.0]
    progress = Progress("encoding the train split", 10_000_000, clock=lambda: now[0], unit="bytes", rate=True)
    now[0] = 6.0
    assert progress.update(3_000_000, "document 2 of 5") == (
        "encoding the train split: 3,000,000/10,000,000 bytes (30%), document 2 of 5, 6 s, about 14 s left "
        "(0.5 M bytes/s)"
    )


def test_a_prepare_says_the_bytes_and_the_document_it_is_at(tmp_path, monkeypatch, capsys):
    """Through a prepare (every chunk's line, no waiting): the train split's bytes, in chunks of 256 bytes, and the
    document being encoded, a long one counted once however many chunks it comes in."""
    from tinygpt.data import datamodule as datamodule_module

    folder = tmp_path / "docs"
    folder.mkdir()
    sizes = [300, 2000, 400, 500]  # the second one: eight chunks
    for i, size in enumerate(sizes):
        (folder / f"d{i}.txt").write_text(TEXT[:size], encoding="utf-8")
    monkeypatch.setenv("TINYGPT_PREPARED", str(tmp_path / "prepared"))
    monkeypatch.setattr(read_chunks, "__defaults__", (256,))
    monkeypatch.setattr(datamodule_module, "Progress", lambda *a, **k: Progress(*a, **k, first_after=-1, every=-1))
    config = {"name": "textdir", "corpus": "dir", "path": str(folder), "glob": "*.txt", "split_by": "hash"}
    TextDataModule({**config, "dev": "none", "test_fraction": 0.0}, context_length=16, seed=0).setup()
    lines = [line for line in capsys.readouterr().out.splitlines() if "encoding the train split" in line]
    total = sum(len(TEXT[:size].encode()) for size in sizes)
    at = [(int(line.split(": ")[1].split("/")[0].replace(",", "")), line.split(", ")[1]) for line in lines]
    assert len(at) >= 10 and all(f"/{total:,} bytes (" in line for line in lines)
    assert [b for b, _ in at] == sorted(b for b, _ in at) and at[-1][0] < total  # the last chunk says nothing
    documents = [d for _, d in at]
    assert documents[0] == "document 1 of 4" and documents[-1] == "document 4 of 4"
    assert sorted(set(documents)) == [f"document {i} of 4" for i in range(1, 5)]
    assert documents.count("document 2 of 4") >= 7  # counted once over its chunks
