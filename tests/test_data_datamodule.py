"""TextDataModule: the held-out text stays out of reach, summaries, errors with names, nothing written."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
from pathlib import Path

import pytest
import torch

from tinygpt.data import DataError, TextDataModule

# Made of characters the train split has, so every tokenizer can decode it once the held-out text is read.
MARKER = "eloi eloi eloi future future future eloi eloi eloi"


def words(seed: int, n: int) -> str:
    rng = random.Random(seed)
    vocab = "time machine traveller the of and a to in was it that he his had with future eloi".split()
    return " ".join(rng.choice(vocab) for _ in range(n)) + "\n"


def book_with_marked_tail(root: Path) -> Path:
    body = words(0, 2000)
    tail = words(1, 60) + MARKER + " §¤\n" + words(2, 30)  # well inside the last 10%; § ¤ occur only here
    path = root / "book.txt"
    path.write_text(body + tail, encoding="utf-8")
    assert len(tail) < 0.1 * len(body + tail) and MARKER not in body
    return path


def reachable_strings(obj, seen=None):
    """Every str reachable from obj through attributes, dataclass fields and containers."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, (int, float, bool, type(None), torch.Tensor, type)):
        return
    seen.add(id(obj))
    if isinstance(obj, str):
        yield obj
        return
    if isinstance(obj, bytes):
        yield obj.decode("utf-8", "replace")
        return
    if isinstance(obj, dict):
        children = [*obj.keys(), *obj.values()]
    elif isinstance(obj, (list, tuple, set, frozenset)):
        children = list(obj)
    elif dataclasses.is_dataclass(obj):
        children = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    elif hasattr(obj, "__dict__"):
        children = list(vars(obj).values())
    else:
        return
    for child in children:
        yield from reachable_strings(child, seen)


def decoded_batches(dm: TextDataModule, steps: int = 30) -> list[str]:
    texts = []
    for x, y in itertools.islice(iter(dm.train_dataloader()), steps):
        texts += [dm.tokenizer.decode(row) for row in torch.cat([x, y[:, -1:]], 1)]
    for batch in dm.val_dataloader():
        texts += [dm.tokenizer.decode(row) for row in batch["input"]]
        texts += [dm.tokenizer.decode(row) for row in batch["target"]]
    return texts


def assert_marker_unreachable(dm: TextDataModule) -> None:
    assert not any(MARKER in s for s in reachable_strings(dm))
    assert MARKER not in dm.tokenizer.to_json()
    assert not any(MARKER in text for text in decoded_batches(dm))
    assert MARKER not in dm.tokenizer.decode(dm.train_split.ids)
    assert MARKER not in json.dumps(dm.describe(), ensure_ascii=False)


def assert_marker_in_test_windows(dm: TextDataModule) -> None:
    test = dm.test_dataloader().dataset
    assert MARKER in dm.tokenizer.decode(test.ids)


@pytest.mark.parametrize("tokenizer", ["char", "bpe"])
def test_held_out_tail_is_read_only_by_test_dataloader(tmp_path, tokenizer):
    text = book_with_marked_tail(tmp_path).read_text(encoding="utf-8")
    cfg = {"root": str(tmp_path), "name": "textfile", "path": "book.txt", "tokenizer": {"name": tokenizer}}
    dm = TextDataModule(cfg, context_length=16, seed=0)
    dm.setup("fit")
    dm.setup("validate")  # idempotent
    assert_marker_unreachable(dm)
    assert_marker_in_test_windows(dm)
    if tokenizer == "char":  # § and ¤ occur only in the held-out text: counted once it is scored
        held_out = text[int(len(text) * 0.9) :]
        unseen = sum(c not in dm.tokenizer.chars for c in held_out)
        assert unseen >= 2 and dm.describe()["splits"]["test"]["unseen_chars"] == unseen


def test_held_out_documents_are_read_only_by_test_dataloader(tmp_path):
    for i in range(5):
        (tmp_path / f"doc{i}.txt").write_text(words(i, 400), encoding="utf-8")
    (tmp_path / "secret.txt").write_text(words(9, 100) + MARKER + "\n", encoding="utf-8")
    assert not any(MARKER in words(i, 400) for i in range(5))
    cfg = {
        "root": str(tmp_path),
        "name": "textdir",
        "corpus": "dir",
        "path": ".",
        "glob": "*.txt",
        "test_documents": ["secret.txt"],
    }
    dm = TextDataModule(cfg, context_length=16, seed=0)
    dm.setup()
    assert dm.test_documents == ("secret.txt",)
    assert_marker_unreachable(dm)
    assert_marker_in_test_windows(dm)


def test_describe_is_json_and_summary_names_the_splits(tmp_path):
    book_with_marked_tail(tmp_path)
    dm = TextDataModule({"root": str(tmp_path), "name": "textfile", "path": "book.txt"}, context_length=16, seed=0)
    described = json.loads(json.dumps(dm.describe()))
    assert described["vocab_size"] == dm.vocab_size == dm.tokenizer.vocab_size
    assert described["tokenizer"]["name"] == "char" and described["train_fraction"] == 1.0
    assert described["splits"]["test"]["tokens"] is None  # not read at set-up
    assert described["settings"]["dev"] == "tail"
    lines = dm.summary_lines()
    assert any("train" in line for line in lines) and any("not read until test scoring" in line for line in lines)


def test_val_batches_are_the_metric_batches(tmp_path):
    book_with_marked_tail(tmp_path)
    dm = TextDataModule({"root": str(tmp_path), "name": "textfile", "path": "book.txt"}, context_length=16, seed=0)
    batch = next(iter(dm.val_dataloader()))
    assert set(batch) == {"input", "target", "scored", "target_bytes", "target_chars", "target_doc"}
    assert batch["input"].shape == batch["target"].shape and batch["scored"].dtype == torch.bool


def test_no_dev_split_gives_no_validation_batches(tmp_path):
    book_with_marked_tail(tmp_path)
    cfg = {"root": str(tmp_path), "name": "textfile", "path": "book.txt", "dev": "none"}
    dm = TextDataModule(cfg, context_length=16, seed=0)
    assert not dm.has_dev and dm.val_dataloader() == [] and dm.dev_split is None


def test_state_dict_round_trip_and_seed_check(tmp_path):
    book_with_marked_tail(tmp_path)
    cfg = {"root": str(tmp_path), "name": "textfile", "path": "book.txt"}
    state = TextDataModule(cfg, context_length=16, seed=4).state_dict()
    assert state == {"seed": 4, "sampler": "counter-v1"}
    TextDataModule(cfg, context_length=16, seed=4).load_state_dict(state)
    with pytest.raises(DataError, match="seed=4 using seed=5"):
        TextDataModule(cfg, context_length=16, seed=5).load_state_dict(state)


def test_no_test_split_refuses_test_dataloader(tmp_path):
    book_with_marked_tail(tmp_path)
    cfg = {"root": str(tmp_path), "name": "textfile", "path": "book.txt", "test_fraction": 0}
    with pytest.raises(DataError, match="no held-out split"):
        TextDataModule(cfg, context_length=16, seed=0).test_dataloader()


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("tokenizer", ["char", "bytes", "bpe"])
def test_nothing_is_written_to_the_data_root(tmp_path, tokenizer):
    book_with_marked_tail(tmp_path)
    before = tree(tmp_path)
    cfg = {"root": str(tmp_path), "name": "textfile", "path": "book.txt", "tokenizer": {"name": tokenizer}}
    dm = TextDataModule(cfg, context_length=16, seed=0)
    dm.prepare_data()
    dm.setup()
    decoded_batches(dm, steps=2)
    list(dm.test_dataloader())
    assert tree(tmp_path) == before


# -- errors: each names the file or field -----------------------------------------------------------------


def make(tmp_path, context_length=16, **data):
    return TextDataModule({"root": str(tmp_path), **data}, context_length=context_length, seed=0)


def test_empty_corpus(tmp_path):
    (tmp_path / "empty.txt").write_text("")
    with pytest.raises(DataError, match=r"empty\.txt.*empty"):
        make(tmp_path, name="textfile", path="empty.txt").setup()


def test_corpus_shorter_than_a_window(tmp_path):
    (tmp_path / "short.txt").write_text("just a few words " * 10)
    with pytest.raises(DataError, match=r"short\.txt has \d+ tokens, fewer than one window of context_length"):
        make(tmp_path, context_length=64, name="textfile", path="short.txt").setup()


def test_glob_matching_nothing(tmp_path):
    (tmp_path / "a.md").write_text("text")
    with pytest.raises(DataError, match=r"data\.glob='\*\.txt' matches no files"):
        make(tmp_path, name="textdir", corpus="dir", path=".", glob="*.txt").setup()


def test_missing_root(tmp_path):
    with pytest.raises(DataError, match=r"data root .*nowhere \(from data\.root\) does not exist"):
        make(tmp_path / "nowhere", name="textfile", path="book.txt").setup()


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"corpus file .*book\.txt \(data\.path=book\.txt\) does not exist"):
        make(tmp_path, name="textfile", path="book.txt").setup()


def test_non_utf8_bytes_name_the_file_and_offset(tmp_path):
    (tmp_path / "latin1.txt").write_bytes("café au lait ".encode("latin-1") * 50)
    with pytest.raises(DataError, match=r"latin1\.txt: not valid UTF-8 at byte offset 3 ") as refused:
        make(tmp_path, name="textfile", path="latin1.txt").setup()
    # the advice converts the file in place: a copy beside it (doc.utf8.txt) would be read by the same glob
    path = tmp_path / "latin1.txt"
    assert f"`iconv -f latin1 -t utf-8 {path} > {path}.utf8 && mv {path}.utf8 {path}`" in str(refused.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "wikipedia"}, r"data\.name='wikipedia': unknown corpus; choose one of"),
        (
            {"tokenizer": {"name": "sentencepiece"}},
            r"data\.tokenizer\.name='sentencepiece': unknown tokenizer",
        ),
        ({"split_unit": "tokens"}, r"split_unit=tokens needs a tokenizer fixed in advance \(bytes or gpt2\)"),
        ({"split_unit": "words"}, r"data\.split_unit='words' is not allowed: must be one of"),
        ({"fraction": "most"}, r"data\.fraction='most': expected a number in \(0, 1\] or one of"),
        ({"fraction": 0}, r"data\.fraction=0\.0: must be in \(0, 1\]"),
        ({"dev": "documents"}, r"data\.dev=documents needs a directory corpus"),
        ({"dev_fraction": 1.0}, r"data\.dev_fraction=1\.0 is not allowed: must be a number in \(0, 1\)"),
        ({"batch_size": 0}, r"data\.batch_size=0 is not allowed: must be an integer >= 1"),
        ({"bacth_size": 8}, r"data\.bacth_size: Key 'bacth_size' not in 'DataConfig'; allowed: name, root, corpus"),
        ({"tokenizer": {"name": "char", "vocab_size": 10}}, r"only bpe takes a vocab_size"),
        ({"name": "textfile", "path": "???"}, r"data\.path is required: give it with data\.path="),
        ({"name": "peps"}, r"data\.name=peps is a dir corpus, but data\.corpus=file"),
    ],
)
def test_bad_settings_are_named(tmp_path, data, message):
    with pytest.raises(DataError, match=message):
        make(tmp_path, **data).setup()


def test_fraction_names_and_numbers():
    from tinygpt.data import parse_fraction

    assert [parse_fraction(v) for v in ("quarter", "half", "full", 0.3, "0.75", 1)] == [
        0.25,
        0.5,
        1.0,
        0.3,
        0.75,
        1.0,
    ]


def test_too_many_documents_held_out(tmp_path):
    for i in range(3):
        (tmp_path / f"d{i}.txt").write_text(words(i, 200))
    base = {"name": "textdir", "corpus": "dir", "path": ".", "glob": "*.txt"}
    with pytest.raises(DataError, match=r"data\.test_k=3 would hold out all 3 documents"):
        make(tmp_path, **base, test_k=3).setup()
    with pytest.raises(DataError, match=r"data\.dev_k=2: only 2 documents remain"):
        make(tmp_path, **base, test_k=1, dev="documents", dev_k=2).setup()


def test_a_large_tail_dev_split_of_a_folder_says_how_to_choose_documents(tmp_path, monkeypatch):
    import tinygpt.data.datamodule as datamodule

    for i in range(4):
        (tmp_path / f"d{i}.txt").write_text(words(i, 300))
    dm = make(tmp_path, name="textdir", corpus="dir", path=".", glob="*.txt", test_k=1)
    dm.setup()
    dev_tokens = dm.describe()["splits"]["dev"]["tokens"]
    assert not any(line.startswith("note: dev holds") for line in dm.summary_lines())
    monkeypatch.setattr(datamodule, "LARGE_DEV_TOKENS", dev_tokens - 1)
    assert f"note: dev holds {dev_tokens:,} tokens (over {dev_tokens - 1:,})" in "\n".join(dm.summary_lines())
    assert "data.dev=documents" in dm.summary_lines()[-1]
    assert dm.summary_lines()[-1].endswith("or score its first N batches at every check: +trainer.limit_val_batches=N")


@pytest.mark.parametrize(
    ("data", "advice"),
    [
        ({"name": "textfile", "corpus": "file", "path": "d0.txt"}, "data.dev_fraction=<share>"),
        (
            {
                "name": "textdir",
                "corpus": "dir",
                "path": ".",
                "glob": "*.txt",
                "test_k": 1,
                "dev": "documents",
                "dev_k": 2,
            },
            "keep fewer documents: data.dev_k=<how many>",
        ),
        (
            {
                "name": "textdir",
                "corpus": "dir",
                "path": ".",
                "glob": "*.txt",
                "split_by": "hash",
                "dev": "documents",
                "test_fraction": 0.2,
                "dev_fraction": 0.2,
            },
            "data.dev_fraction=<share>",
        ),
    ],
)
def test_every_large_dev_split_says_how_to_make_it_smaller(tmp_path, monkeypatch, data, advice):
    """Not only a folder's tail: any dev split over the line is named at start, with the setting that makes this
    corpus's smaller and Lightning's limit_val_batches, which scores the same first batches at every check."""
    from torch.utils.data import SequentialSampler

    import tinygpt.data.datamodule as datamodule

    for i in range(30):
        (tmp_path / f"d{i}.txt").write_text(words(i, 100))
    dm = make(tmp_path, **data)
    dm.setup()
    monkeypatch.setattr(datamodule, "LARGE_DEV_TOKENS", 1)
    note = dm.summary_lines()[-1]
    assert note.startswith("note: dev holds") and advice in note, note
    assert note.endswith("+trainer.limit_val_batches=N")
    assert isinstance(dm.val_dataloader().sampler, SequentialSampler)  # the first N batches are the same each check


def test_the_large_dev_note_is_at_the_documented_500000_tokens(tmp_path):
    """docs/data.md names the figure; the tests above move the threshold, so this one holds it to the page."""
    from conftest import REPO

    import tinygpt.data.datamodule as datamodule

    assert datamodule.LARGE_DEV_TOKENS == 500_000
    assert "When a dev split is more than 500,000 tokens the run says so" in (REPO / "docs" / "data.md").read_text()
