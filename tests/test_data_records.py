"""Records corpora (tinygpt/data/records.py): JSONL, Parquet and a datasets dataset, split by a seeded hash of
each record's id, written once into three files that the rest of the data path reads as files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TINY_RUN, compose_train

from tinygpt.data.config import DataConfig
from tinygpt.data.errors import DataError
from tinygpt.data.records import record_store, split_of
from tinygpt.train.run import train


def stories(n: int, start: int = 0) -> list[dict]:
    """n records with ids s<i>, each text its own: a few words, one of them empty."""
    words = "the time traveller morlocks eloi sphinx night light green white".split()
    text = [f"story {i}: " + " ".join(words[(i * k) % len(words)] for k in range(9)) for i in range(start, start + n)]
    return [{"id": f"s{i}", "text": "" if i == 7 else t} for i, t in enumerate(text, start=start)]


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def config(**values) -> DataConfig:
    return DataConfig(corpus="records", **{"name": "jsonl", "id_field": "id", **values})


def shards_config(path: Path, **values) -> DataConfig:
    from tinygpt.data.tokenizers import TokenizerConfig

    return DataConfig(name="llmc", corpus="shards", path=str(path), tokenizer=TokenizerConfig(name="gpt2"), **values)


@pytest.fixture
def prepared(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "prepared"
    monkeypatch.setenv("TINYGPT_PREPARED", str(folder))
    return folder


def split_texts(store: Path) -> dict[str, list[str]]:
    return {split: (store / f"{split}.txt").read_text().splitlines() for split in ("train", "dev", "test")}


def test_each_record_goes_where_the_hash_of_its_id_says_and_no_held_out_record_reaches_train_or_dev(tmp_path, prepared):
    records = stories(2000)
    path = write_jsonl(tmp_path / "s.jsonl", records)
    store = record_store(path, config(path=str(path), test_fraction=0.1, dev_fraction=0.05, split_seed=3))
    texts = split_texts(store)
    expected = {"train": [], "dev": [], "test": []}
    for record in records:
        if record["text"]:
            expected[split_of(record["id"], 3, 0.1, 0.05)].append(record["text"])
    assert texts == expected  # in source order, one line a record, the empty one skipped
    assert 150 < len(texts["test"]) < 250 and 60 < len(texts["dev"]) < 140  # the shares scale with the corpus
    assert set(texts["test"]).isdisjoint(set(texts["train"]) | set(texts["dev"]))
    manifest = json.loads((store / "records.json").read_text())
    assert manifest["empty_records"] == 1 and sum(s["records"] for s in manifest["splits"].values()) == 1999


def test_a_record_keeps_its_split_as_records_are_added_and_another_seed_moves_them(tmp_path, prepared):
    small = write_jsonl(tmp_path / "small.jsonl", stories(300))
    grown = write_jsonl(tmp_path / "grown.jsonl", stories(300) + stories(300, start=300))
    before = split_texts(record_store(small, config(path=str(small))))
    after = split_texts(record_store(grown, config(path=str(grown))))
    for split in before:
        assert after[split][: len(before[split])] == before[split]
    other = split_texts(record_store(small, config(path=str(small), split_seed=1)))
    assert other["test"] != before["test"]


def test_without_an_id_field_a_record_is_named_by_its_file_and_line(tmp_path, prepared):
    path = write_jsonl(tmp_path / "s.jsonl", stories(200))
    texts = split_texts(record_store(path, config(path=str(path), id_field=None)))
    lines = [r["text"] for r in stories(200)]
    assert texts["test"] == [t for n, t in enumerate(lines, 1) if t and split_of(f"s.jsonl:{n}", 0, 0.1, 0.1) == "test"]


def test_jsonl_parquet_and_a_datasets_dataset_of_the_same_records_give_the_same_splits(tmp_path, prepared, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))  # read when datasets is first imported
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    datasets = pytest.importorskip("datasets")
    records = stories(500)
    jsonl = write_jsonl(tmp_path / "s.jsonl", records)
    parquet = tmp_path / "parquet"
    parquet.mkdir()
    table = pa.Table.from_pylist(records)
    pq.write_table(table.slice(0, 250), parquet / "part-0.parquet")
    pq.write_table(table.slice(250), parquet / "part-1.parquet")
    saved = tmp_path / "dataset"
    datasets.Dataset.from_list(records).save_to_disk(str(saved))
    stores = [
        record_store(jsonl, config(path=str(jsonl))),
        record_store(parquet, config(name="parquet", path=str(parquet))),
        record_store(saved, config(name="hf", path=str(saved))),  # written by save_to_disk
        record_store(parquet, config(name="hf", path=str(parquet))),  # a folder of data files: load_dataset's
    ]
    contents = [{split: (s / f"{split}.txt").read_bytes() for split in ("train", "dev", "test")} for s in stores]
    assert all(c == contents[0] for c in contents) and contents[0]["test"]
    assert len({s.name for s in stores}) == 4  # each source its own store


def test_a_hub_name_reaches_load_dataset_with_its_config_and_split(tmp_path, prepared, monkeypatch):
    """A name that is no local path is the hub's (the library's own loader and cache): passed as it is, with
    data.dataset_config and data.dataset_split, once for a store written. The hub cannot be reached here, so
    load_dataset answers for it."""
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf_cache"))
    datasets = pytest.importorskip("datasets")
    records = stories(300)
    calls = []

    def load_dataset(path, name=None, split=None, **kwargs):
        calls.append((path, name, split))
        return datasets.Dataset.from_list(records)

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    monkeypatch.chdir(tmp_path)  # no folder of that name where the name is looked up as a path
    hub = record_store(Path("roneneldan/TinyStories"), config(name="hf", path="roneneldan/TinyStories", **HUB))
    assert calls == [("roneneldan/TinyStories", "en", "validation")]  # loaded once: its identity and its rows
    jsonl = write_jsonl(tmp_path / "s.jsonl", records)
    local = record_store(jsonl, config(path=str(jsonl)))
    assert all((hub / f).read_bytes() == (local / f).read_bytes() for f in ("train.txt", "dev.txt", "test.txt"))


HUB = {"dataset_config": "en", "dataset_split": "validation"}


def test_a_hub_name_the_library_cannot_reach_is_refused_in_one_line_naming_it(tmp_path):
    """Offline with nothing in the cache: datasets' own error, as one line that names data.path, from the program
    a user runs (a fresh process: the hub's offline switch is read when the library is imported)."""
    pytest.importorskip("datasets")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "TINYGPT_PREPARED": str(tmp_path)}
    command = [sys.executable, "-m", "tinygpt.cli.prepare", "data=hf", "data.path=tinygpt-test/no-such-stories"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    named = "data.path=tinygpt-test/no-such-stories: the datasets library could not load it:"
    assert last.startswith(f"[tinygpt] error: {named}")
    assert "tinygpt-test/no-such-stories" in last.split("could not load it:")[1]  # the library's own words
    assert not list(tmp_path.glob("records/*"))  # no store written


def test_a_jsonl_corpus_trains_and_its_held_out_split_is_read_only_when_scored(tmp_path, prepared):
    path = write_jsonl(tmp_path / "s.jsonl", stories(600))
    record = train(compose_train([*TINY_RUN, "data=jsonl", f"data.path={path}", "data.id_field=id"]), tmp_path / "run")
    assert record["status"] == "finished" and record["best"]["dev_bits_per_byte"] > 0
    data = record["data"]
    assert data["corpus"]["kind"] == "records" and data["splits"]["test"]["tokens"] is None
    counts = data["records"]["splits"]
    assert sum(v["records"] for v in counts.values()) == 599 and counts["test"]["records"] > 30
    for split in ("train", "dev", "test"):  # each split is its records' text, a newline after each
        assert data["splits"][split]["bytes"] == counts[split]["bytes"]
    texts = {r["text"] + "\n" for r in stories(600) if r["text"] and split_of(r["id"], 0, 0.1, 0.1) == "dev"}
    assert data["splits"]["dev"]["bytes"] == sum(len(t.encode()) for t in texts)


@pytest.mark.parametrize(
    ("lines", "values", "message"),
    [
        (['{"body": "a"}'], {}, r"s\.jsonl:1: no field 'text' \(data\.text_field\); the record has \['body'\]$"),
        (['{"text": "a"}', "{not json"], {}, r"s\.jsonl:2: not a JSON record"),
        (['{"text": 3}'], {}, r"s\.jsonl:1: field 'text' is a int, not text$"),
        (['{"text": "a"}'], {"id_field": "key"}, r"s\.jsonl:1: no field 'key' \(data\.id_field\)"),
        (['{"text": ""}'], {}, r"no record with text went to the train split \(1 empty\)$"),
    ],
)
def test_a_bad_record_is_refused_in_one_line_naming_it_and_leaves_no_store(tmp_path, prepared, lines, values, message):
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=message):
        record_store(path, config(path=str(path), **{"id_field": None, **values}))
    assert not (prepared / "records").exists() or not any(
        (f / "records.json").exists() for f in (prepared / "records").iterdir()
    )


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"dev": "documents"}, r"^data=jsonl splits its records by a seeded hash of their ids"),
        ({"split_unit": "tokens", "tokenizer": {"name": "bytes"}}, r"^data=jsonl splits by records"),
    ],
)
def test_folder_rules_are_refused_for_records(values, message):
    with pytest.raises(DataError, match=message):
        DataConfig(name="jsonl", corpus="records", path="s.jsonl", **values)


def test_a_records_setting_on_another_corpus_is_refused_not_ignored():
    with pytest.raises(DataError, match=r"^data\.text_field='body' applies to records corpora only"):
        DataConfig(name="textfile", corpus="file", path="a.txt", text_field="body")


def test_a_killed_passs_staging_folder_is_removed_by_the_next(tmp_path, prepared):
    path = write_jsonl(tmp_path / "s.jsonl", stories(100))
    settings = config(path=str(path))
    store = record_store(path, settings)
    shutil.rmtree(store)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    abandoned = store.parent / f".{store.name}.{int(dead.stdout)}.x1"  # a pass killed before its rename
    abandoned.mkdir()
    (abandoned / "train.txt").write_text("half")
    assert record_store(path, settings) == store and not abandoned.exists()
    assert sorted(p.name for p in store.parent.iterdir()) == [store.name]


def test_a_store_whose_file_changed_is_refused_in_one_line_naming_it(tmp_path, prepared):
    path = write_jsonl(tmp_path / "s.jsonl", stories(100))
    settings = config(path=str(path))
    store = record_store(path, settings)
    test = store / "test.txt"
    size = test.stat().st_size
    test.write_bytes(test.read_bytes()[:-3])
    with pytest.raises(DataError, match=rf"^records file {test} holds {size - 3} bytes, its manifest says {size:,}; "):
        record_store(path, settings)


def write_shard(
    path: Path, tokens: list[int], *, magic: int = 20240520, count: int | None = None, version: int = 1
) -> Path:
    """An llm.c token shard: 256 int32 (magic, version 1, the count), then the tokens as uint16."""
    import numpy as np

    header = np.zeros(256, dtype="<i4")
    header[:3] = magic, version, len(tokens) if count is None else count
    path.write_bytes(header.tobytes() + np.asarray(tokens, dtype="<u2").tobytes())
    return path


@pytest.fixture(scope="module")
def gpt2():
    from tinygpt.data.root import resolve_data_root
    from tinygpt.data.tokenizers import TokenizerConfig, build_tokenizer

    return build_tokenizer(TokenizerConfig(name="gpt2"), [], resolve_data_root(None))


def shard_corpus(folder: Path, gpt2, n: int = 300) -> tuple[list[Path], list[list[int]]]:
    """Two llm.c shards of n stories, as llm.c's fineweb.py writes them: each document <|endoftext|> then its
    tokens, the first shard filled to its size and cut inside a held-out document, which the second continues."""
    import numpy as np

    documents = [[50256, *gpt2.encode(r["text"])] for r in stories(n) if r["text"]]
    stream = [token for document in documents for token in document]
    starts = np.cumsum([0] + [len(d) for d in documents[:-1]])
    # cut inside a held-out document, whose second part the hash of its own place (shard 2, offset 0) puts in train
    assert split_of("tiny_train_000001.bin:0", 0, 0.1, 0.1) == "train"
    cut = next(
        int(s) + 3 for s in starts[len(starts) // 2 :] if split_of(f"tiny_train_000000.bin:{s}", 0, 0.1, 0.1) == "test"
    )
    folder.mkdir()
    first = write_shard(folder / "tiny_train_000000.bin", stream[:cut])
    second = write_shard(folder / "tiny_train_000001.bin", stream[cut:])
    return [first, second], documents


def expected_split_ids(paths: list[Path], seed: int = 0, test: float = 0.1, dev: float = 0.1) -> dict[str, list]:
    """The rule, written out: a document starts at an <|endoftext|>, its id is <shard>:<offset>, and the tokens
    before a shard's first <|endoftext|> go with the previous shard's last document."""
    import numpy as np

    out: dict[str, list] = {"train": [], "dev": [], "test": []}
    split = None
    for path in paths:
        tokens = np.fromfile(path, dtype="<u2", offset=1024).tolist()
        for offset, token in enumerate(tokens):
            if token == 50256 or split is None:
                split = split_of(f"{path.name}:{offset}", seed, test, dev)
            out[split].append(token)
    return out


def test_llmc_shards_are_split_by_document_as_ids_and_train_and_score_with_gpt2_byte_lengths(tmp_path, prepared, gpt2):
    """The ids are copied, never decoded: each document (its <|endoftext|> and the tokens to the next) goes where the
    hash of its place says, the document cut between two shards as one; bits per byte counts each id's bytes, and
    <|endoftext|>'s none."""
    import numpy as np

    from tinygpt.data.shards import store_counts, token_store, token_tables
    from tinygpt.train.evaluate import evaluate

    paths, documents = shard_corpus(tmp_path / "shards", gpt2)
    assert np.fromfile(paths[1], dtype="<u2", offset=1024)[0] != 50256  # the second shard starts mid-document
    store = token_store(tmp_path / "shards", shards_config(tmp_path / "shards"), gpt2)
    expected = expected_split_ids(paths)
    for split, ids in expected.items():
        assert np.fromfile(store / f"{split}.ids", dtype="<u2").tolist() == ids
    assert all(len(ids) > 100 for ids in expected.values())  # each split holds documents
    token_bytes, _ = token_tables(gpt2)
    counts = store_counts(store)
    assert sum(c["documents"] for c in counts.values()) == len(documents)
    assert counts["test"]["bytes"] == int(token_bytes[expected["test"]].sum())
    assert sum(c["bytes"] for c in counts.values()) == sum(len(gpt2.decode(d[1:]).encode()) for d in documents)

    run_dir = tmp_path / "run"
    overrides = ["data=llmc", f"data.path={tmp_path / 'shards'}", "score_once.steps=[8]"]
    record = train(compose_train([*TINY_RUN, *overrides]), run_dir)
    assert record["status"] == "finished" and record["data"]["tokenizer"]["name"] == "gpt2"
    train_split = record["data"]["splits"]["train"]
    assert train_split["tokens"] == len(expected["train"])
    assert train_split["bytes"] == int(token_bytes[expected["train"]].sum())
    [row] = evaluate(str(run_dir), ckpt=str(run_dir / "checkpoints" / "step000008.ckpt"), split="test")
    assert row["bytes"] == int(token_bytes[expected["test"][1:]].sum())  # the first id has nothing to predict it
    assert row["bits_per_byte"] > 0


def test_data_fraction_on_shards_is_a_share_of_the_train_ids_and_the_whole_split_is_linked_not_copied(
    tmp_path, prepared, gpt2
):
    from tinygpt.data.datamodule import prepare_corpus

    paths, _ = shard_corpus(tmp_path / "shards", gpt2, n=120)
    train_ids = expected_split_ids(paths)["train"]
    data = shards_config(tmp_path / "shards", fraction=0.25)
    *_, splits = prepare_corpus(data)
    assert splits.train.tokens.tolist() == train_ids[: int(len(train_ids) * 0.25)]
    # the whole train split is the store's file itself, linked into the prepared folder, not a second copy
    corpus, _, whole = prepare_corpus(shards_config(tmp_path / "shards"))[1:]
    assert whole.train.tokens.tolist() == train_ids
    store_file = corpus.documents[0].path
    assert (whole.folder / "train.ids").stat().st_ino == store_file.stat().st_ino
    assert (splits.folder / "train.ids").stat().st_ino != store_file.stat().st_ino
    assert whole.manifest["train"]["bytes"] == corpus.documents[0].bytes


def test_a_shards_corpus_refuses_another_tokenizer_and_a_changed_store_in_one_line(tmp_path, prepared, gpt2):
    from tinygpt.baselines.texts import plan_for
    from tinygpt.data.shards import token_store
    from tinygpt.data.tokenizers import TokenizerConfig

    with pytest.raises(DataError, match=r"^data=llmc holds GPT-2 ids, not text: the baselines and analyses read text"):
        plan_for(shards_config(tmp_path))
    with pytest.raises(DataError, match=r"^data\.tokenizer=char: data=llmc reads GPT-2 token ids as the shards hold"):
        DataConfig(name="llmc", corpus="shards", path="x", tokenizer=TokenizerConfig(name="char"))
    shard_corpus(tmp_path / "shards", gpt2, n=40)
    data = shards_config(tmp_path / "shards")
    store = token_store(tmp_path / "shards", data, gpt2)
    with open(store / "dev.ids", "ab") as file:
        file.write(b"\x00\x00")
    with pytest.raises(
        DataError, match=r"dev\.ids holds \d+ bytes, its manifest says [\d,]+; delete .* to split the shards"
    ):
        token_store(tmp_path / "shards", data, gpt2)


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("magic", r"tiny\.bin: not an llm\.c token shard \(magic 20240521, expected 20240520\)$"),
        ("truncated", r"tiny\.bin: its header says 11 tokens \(1,046 bytes\), the file holds 1,044 bytes"),
        # longer than its header says: the extra ids would be dropped without a word
        ("longer", r"tiny\.bin: its header says 10 tokens \(1,044 bytes\), the file holds 1,046 bytes"),
        ("version", r"tiny\.bin: llm\.c shard version 2, this tinygpt reads version 1$"),
        ("vocabulary", r"tiny\.bin: holds token id 50257, above GPT-2's vocabulary"),
    ],
)
def test_a_bad_shard_is_refused_in_one_line_naming_it(tmp_path, prepared, gpt2, kind, message):
    tokens = [50256, 464, 640, 50256, 17, 18, 19, 20, 21, 22, 23]
    if kind == "magic":
        shard = write_shard(tmp_path / "tiny.bin", tokens, magic=20240521)
    elif kind == "truncated":
        shard = write_shard(tmp_path / "tiny.bin", tokens[:-1], count=len(tokens))
    elif kind == "longer":
        shard = write_shard(tmp_path / "tiny.bin", tokens, count=len(tokens) - 1)
    elif kind == "version":
        shard = write_shard(tmp_path / "tiny.bin", tokens, version=2)
    else:
        shard = write_shard(tmp_path / "tiny.bin", [*tokens, 50257])
    from tinygpt.data.shards import token_store

    with pytest.raises(DataError, match=message):
        token_store(shard, shards_config(shard), gpt2)


def test_a_record_ending_in_a_newline_gets_no_second_one(tmp_path, prepared):
    """Each record is its text and one newline: a text that already ends in one is not given a blank line after it
    (whose byte bits per byte would divide by)."""
    records = [{"id": f"r{i}", "text": f"record {i}" + ("\n" if i % 2 else "")} for i in range(200)]
    path = write_jsonl(tmp_path / "r.jsonl", records)
    store = record_store(path, config(path=str(path)))
    written = b"".join((store / f"{split}.txt").read_bytes() for split in ("train", "dev", "test"))
    assert len(written) == sum(len(r["text"].rstrip("\n")) + 1 for r in records)
    assert b"\n\n" not in written


def test_blank_lines_in_a_jsonl_file_are_skipped(tmp_path, prepared):
    records = stories(120)
    plain = write_jsonl(tmp_path / "plain.jsonl", records)
    spaced = tmp_path / "spaced.jsonl"
    spaced.write_text("\n" + "".join(json.dumps(r) + "\n\n  \n" for r in records))
    assert split_texts(record_store(spaced, config(path=str(spaced)))) == split_texts(
        record_store(plain, config(path=str(plain)))
    )


def test_end_of_text_stands_for_no_bytes_and_no_characters(tmp_path, prepared, gpt2):
    """In a shards corpus every document starts with <|endoftext|>; it is scored, but it is no text: bits per byte
    and per character divide by the documents' own bytes and characters."""
    from tinygpt.data.shards import GPT2_EOT, encoded_blocks, token_store, token_tables

    token_bytes, token_chars = token_tables(gpt2)
    assert token_bytes[GPT2_EOT] == 0 and token_chars[GPT2_EOT] == 0
    assert token_chars[gpt2.encode(" é")[0]] == len(gpt2.decode([gpt2.encode(" é")[0]]))
    paths, _ = shard_corpus(tmp_path / "shards", gpt2, n=60)
    store = token_store(tmp_path / "shards", shards_config(tmp_path / "shards"), gpt2)
    dev_ids = expected_split_ids(paths)["dev"]
    text = gpt2.decode([t for t in dev_ids if t != GPT2_EOT])
    blocks = list(encoded_blocks(store / "dev.ids", gpt2))
    assert sum(int(b.token_chars.sum()) for b in blocks) == len(text)
    assert sum(int(b.token_bytes.sum()) for b in blocks) == len(text.encode("utf-8"))
