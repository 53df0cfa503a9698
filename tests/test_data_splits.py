"""Splits are disjoint and cover the corpus as documented (tinygpt/data/splits.py)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from tinygpt.common.typed import typed
from tinygpt.data import BytesTokenizer, DataConfig, DataError, TextDataModule
from tinygpt.data.corpus import open_corpus
from tinygpt.data.documents import read_piece
from tinygpt.data.kinds import plan_splits
from tinygpt.data.root import resolve_data_root
from tinygpt.data.splits import choose_documents

WORDS = "the time machine traveller é ü naïve — “quoted” ✅ 🔗 morlocks eloi sphinx".split()


def salad(seed: int, n_words: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n_words)) + "\n"


def plan_for(root: Path, **data):
    config = typed(DataConfig, {"root": str(root), **data}, "data", DataError)
    return plan_splits(open_corpus(config, resolve_data_root(config.root)), config)


def text_of(pieces) -> str:
    return "".join(read_piece(p) for p in pieces)


@pytest.fixture
def book(tmp_path) -> tuple[Path, str]:
    text = salad(0, 3000)
    (tmp_path / "book.txt").write_text(text, encoding="utf-8")
    return tmp_path, text


@pytest.fixture
def shelf(tmp_path) -> tuple[Path, dict[str, str]]:
    docs = {f"doc{i}.txt": salad(i, 150 + 40 * i) for i in range(7)}
    for name, text in docs.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "notes.md").write_text("not matched by the glob", encoding="utf-8")
    return tmp_path, docs


def test_file_splits_are_tail_cuts_that_cover_the_text(book):
    root, text = book
    plan = plan_for(root, name="textfile", path="book.txt", test_fraction=0.1, dev_fraction=0.1)
    train, dev, test = text_of(plan.train), text_of(plan.dev), text_of(plan.test)
    assert train + dev + test == text  # disjoint, in order, nothing lost
    n_rest = int(len(text) * 0.9)
    assert test == text[n_rest:]
    assert dev == text[int(n_rest * 0.9) : n_rest]
    assert plan.fit_full == plan.train  # fraction 1


def test_fraction_takes_a_prefix_of_fit_and_leaves_dev_and_test_alone(book):
    root, _ = book
    full = plan_for(root, name="textfile", path="book.txt")
    half = plan_for(root, name="textfile", path="book.txt", fraction="half")
    fit = text_of(full.fit_full)
    assert text_of(half.train) == fit[: int(len(fit) * 0.5)]
    assert text_of(half.dev) == text_of(full.dev)
    assert half.test == full.test


def test_no_test_and_no_dev(book):
    root, text = book
    plan = plan_for(root, name="textfile", path="book.txt", test_fraction=0, dev="none")
    assert plan.test == () and plan.dev == ()
    assert text_of(plan.train) == text


def test_dir_splits_partition_whole_documents(shelf):
    root, docs = shelf
    plan = plan_for(root, name="textdir", corpus="dir", path=".", glob="*.txt", test_k=2, dev="documents", dev_k=2)
    train = [p.document for p in plan.train]
    dev = [p.document for p in plan.dev]
    test = [p.document for p in plan.test]
    assert sorted(train + dev + test) == sorted(docs)  # a partition of the matched documents
    assert len(test) == 2 and len(dev) == 2
    assert not (set(train) & set(dev)) and not (set(train) & set(test)) and not (set(dev) & set(test))
    assert tuple(test) == plan.test_documents and tuple(dev) == plan.dev_documents
    for pieces in (plan.train, plan.dev, plan.test):  # whole documents, in sorted name order
        assert [p.document for p in pieces] == sorted(p.document for p in pieces)
        assert all(read_piece(p) == docs[p.document] for p in pieces)


def test_seeded_document_choice_is_reproducible_and_depends_on_the_seed():
    names = [f"d{i:02d}" for i in range(40)]
    assert choose_documents(names, 3, 0, 0) == choose_documents(names, 3, 0, 0)
    choices = {choose_documents(names, 3, seed, 0) for seed in range(5)}
    assert len(choices) > 1
    assert choose_documents(names, 3, 0, 0) != choose_documents(names, 3, 0, 1)  # test and dev streams differ


def test_listed_test_documents_are_held_out(shelf):
    root, docs = shelf
    plan = plan_for(root, name="textdir", corpus="dir", path=".", glob="*.txt", test_documents=["doc3.txt", "doc1.txt"])
    assert plan.test_documents == ("doc1.txt", "doc3.txt")
    assert text_of(plan.test) == docs["doc1.txt"] + docs["doc3.txt"]
    with pytest.raises(DataError, match="doc9.txt"):
        plan_for(root, name="textdir", corpus="dir", path=".", glob="*.txt", test_documents=["doc9.txt"])


def test_dir_dev_tail_is_the_tail_of_the_remaining_documents(shelf):
    root, docs = shelf
    plan = plan_for(root, name="textdir", corpus="dir", path=".", glob="*.txt", test_k=2, dev="tail", dev_fraction=0.2)
    rest = "".join(docs[name] for name in sorted(docs) if name not in plan.test_documents)
    assert text_of(plan.train) + text_of(plan.dev) == rest
    assert text_of(plan.dev) == rest[int(len(rest) * 0.8) :]


def test_token_unit_cuts_at_token_boundaries(book):
    root, text = book
    data = {"root": str(root), "name": "textfile", "path": "book.txt", "tokenizer": {"name": "bytes"}}
    dm = TextDataModule({**data, "split_unit": "tokens", "test_fraction": 0}, context_length=8, seed=0)
    dm.setup()
    ids = torch.tensor(BytesTokenizer().encode(text))
    n_train = int(len(ids) * 0.9)  # 000: the first 90% of the tokens train, the last 10% validate
    assert torch.equal(dm.train_split.ids, ids[:n_train])
    assert torch.equal(dm.dev_split.ids, ids[n_train:])
    splits = dm.describe()["splits"]
    assert splits["train"]["bytes"] + splits["dev"]["bytes"] == len(text.encode())
    assert splits["train"]["chars"] + splits["dev"]["chars"] == len(text)


def test_split_counts_add_up_in_describe(book):
    root, text = book
    dm = TextDataModule({"root": str(root), "name": "textfile", "path": "book.txt"}, context_length=8, seed=0)
    dm.setup()
    splits = dm.describe()["splits"]
    assert sum(splits[s]["chars"] for s in ("train", "dev", "test")) == len(text)
    assert sum(splits[s]["bytes"] for s in ("train", "dev", "test")) == len(text.encode())


def _folder(root: Path, n: int, start: int = 0) -> Path:
    folder = root / "docs"
    folder.mkdir(exist_ok=True)
    for i in range(start, start + n):
        (folder / f"doc{i:04d}.txt").write_text(f"document {i}: " + salad(i, 30) + "\n")
    return folder


def test_textdir_holds_out_a_share_of_documents_by_a_hash_of_their_names(tmp_path):
    """data=textdir's rule (data.split_by=hash): the held-out share scales with the folder (10% of 400 documents,
    not 2), no held-out document reaches train or dev, and a document keeps its split as documents are added."""
    from conftest import compose_train

    from tinygpt.data.records import split_of

    folder = _folder(tmp_path, 400)
    data = typed(DataConfig, compose_train(["data=textdir", f"data.path={folder}"]).data, "data")
    assert data.split_by == "hash"
    plan = plan_splits(open_corpus(data, resolve_data_root(None)), data)
    names = sorted(p.name for p in folder.iterdir())
    expected = tuple(n for n in names if split_of(n, 0, 0.1, 0.0) == "test")
    assert plan.test_documents == expected and 25 < len(expected) < 60
    reached = {p.document for p in plan.train + plan.dev}
    assert not reached & set(expected) and {p.document for p in plan.test} == set(expected)
    # dev=documents: the next dev_fraction of the documents by the same hash
    with_dev = plan_splits(open_corpus(data, resolve_data_root(None)), DataConfig(**{**vars(data), "dev": "documents"}))
    assert with_dev.dev_documents == tuple(n for n in names if split_of(n, 0, 0.1, 0.1) == "dev")
    assert not set(with_dev.dev_documents) & set(with_dev.test_documents)
    _folder(tmp_path, 200, start=400)  # the folder grows
    grown = plan_splits(open_corpus(data, resolve_data_root(None)), data)
    assert set(expected) <= set(grown.test_documents) and len(grown.test_documents) > len(expected)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"test_k": 5}, r"^data\.test_k=5 counts documents chosen under data\.split_by=choice; data=textdir splits"),
        ({"dev_k": 3}, r"^data\.dev_k=3 counts documents chosen under data\.split_by=choice"),
        ({"test_documents": ["a.txt"]}, r"^data\.test_documents lists the held-out documents, but data\.split_by=hash"),
        ({"split_by": "random"}, r"^data\.split_by='random' is not allowed: must be one of choice, hash$"),
    ],
)
def test_a_setting_the_hash_split_would_not_read_is_refused(values, message):
    settings = {"name": "textdir", "corpus": "dir", "path": "docs", "glob": "*.txt", "split_by": "hash", **values}
    with pytest.raises(DataError, match=message):
        DataConfig(**settings)


def test_split_by_is_refused_where_it_has_no_meaning():
    with pytest.raises(DataError, match=r"^data\.split_by=hash applies to folder corpora"):
        DataConfig(name="textfile", corpus="file", path="a.txt", split_by="hash")
    with pytest.raises(DataError, match=r"^data=jsonl splits its records by a hash of their ids: data\.split_by"):
        DataConfig(name="jsonl", corpus="records", path="a.jsonl", split_by="choice")


def test_holding_out_every_document_under_the_hash_split_is_refused_early_with_the_setting_to_lower(tmp_path):
    """A test_fraction whose hash takes every document of a small folder: refused while the splits are planned,
    naming data.test_fraction, not later as a train split with nothing in it."""
    from tinygpt.data.records import split_of

    folder = _folder(tmp_path, 3)
    names = sorted(p.name for p in folder.iterdir())
    assert all(split_of(n, 0, 0.99, 0.0) == "test" for n in names)  # the hash puts all three in test
    data = DataConfig(name="textdir", corpus="dir", path=str(folder), glob="*.txt", split_by="hash", test_fraction=0.99)
    with pytest.raises(
        DataError, match=r"^data\.split_by=hash holds out all 3 documents of .*docs; lower data\.test_fraction$"
    ):
        plan_splits(open_corpus(data, resolve_data_root(None)), data)
