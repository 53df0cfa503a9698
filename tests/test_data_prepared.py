"""Prepared corpora (tinygpt/data/prepared.py): the encoded splits written once, memory-mapped by every later run.

What must hold: the mapped train split is exactly the in-memory encoding (so every committed result reproduces),
a second run encodes nothing, a sweep's jobs share one folder, a changed corpus is prepared again, a killed
prepare leaves no folder that looks complete, and a damaged folder is refused in one line naming the file.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO

from tinygpt.data import TextDataModule, store
from tinygpt.data import datamodule as datamodule_module
from tinygpt.data import encoded as encoded_module
from tinygpt.data import prepared as prepared_module
from tinygpt.data.batches import RandomWindows
from tinygpt.data.documents import read_chunks, read_piece
from tinygpt.data.encoded import encode_segments
from tinygpt.data.errors import DataError
from tinygpt.data.prepared import MANIFEST, ids_dtype, read_prepared


@pytest.fixture
def prepared_dir(tmp_path, monkeypatch):
    folder = tmp_path / "prepared"
    monkeypatch.setenv("TINYGPT_PREPARED", str(folder))
    return folder


def folders(prepared: Path) -> list[Path]:
    """The prepared folders (complete or staging) under ``prepared``, without the corpora's scans beside them."""
    return sorted(p for p in prepared.iterdir() if p.name != "scans")


@pytest.fixture
def corpus(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(6):
        (folder / f"doc{i}.txt").write_text(
            f"Document {i}: " + "the quick brown fox jumps over the lazy dog. " * (40 + i)
        )
    return folder


def module(corpus, seed=0, context_length=16, tokenizer="char", **data):
    config = {
        "name": "textdir",
        "corpus": "dir",
        "path": str(corpus),
        "glob": "*.txt",
        "test_k": 1,
        "dev": "documents",
        "dev_k": 1,
        "tokenizer": {"name": tokenizer},
        **data,
    }
    dm = TextDataModule(config, context_length=context_length, seed=seed)
    dm.setup()
    return dm


@pytest.mark.parametrize("tokenizer", ["char", "bytes", "bpe"])
def test_the_mapped_train_split_is_the_in_memory_encoding_and_gives_the_same_batches(corpus, prepared_dir, tokenizer):
    dm = module(corpus, tokenizer=tokenizer)
    plan = dm.prepared.plan
    expected = encode_segments(dm.tokenizer, [(piece.document, read_piece(piece)) for piece in plan.train])
    assert torch.equal(dm.train_split.ids, expected.ids)
    assert (dm.train_split.chars, dm.train_split.bytes) == (expected.chars, expected.bytes)
    assert dm.train_split.tokens.dtype == np.uint16 and isinstance(dm.train_split.tokens, np.memmap)
    mapped = RandomWindows(dm.train_split.tokens, 4, 16, seed=3)
    in_memory = RandomWindows(expected.ids, 4, 16, seed=3)
    for step in (0, 1, 57):
        for got, want in zip(mapped.batch(step), in_memory.batch(step), strict=True):
            assert got.dtype == torch.long and torch.equal(got, want)


def test_a_second_run_maps_the_folder_and_encodes_nothing(corpus, prepared_dir, monkeypatch):
    first = module(corpus)
    assert first.prepared.written and first.prepared.folder.parent == prepared_dir

    def refuse(*args, **kwargs):
        raise AssertionError("encoded or scanned again")

    monkeypatch.setattr(datamodule_module, "_encode", refuse)
    monkeypatch.setattr(datamodule_module, "build_tokenizer", refuse)
    monkeypatch.setattr("tinygpt.data.documents.scan_document", refuse)  # the files' scan is kept too: none is read
    # another job of the same sweep: another seed and context length, the same text and tokenizer
    second = module(corpus, seed=1, context_length=8)
    assert not second.prepared.written and second.prepared.folder == first.prepared.folder
    assert torch.equal(second.train_split.ids, first.train_split.ids)
    assert torch.equal(second.dev_split.ids, first.dev_split.ids)
    assert torch.equal(second.dev_split.token_bytes, first.dev_split.token_bytes)
    assert second.tokenizer.to_json() == first.tokenizer.to_json()
    assert second.describe()["splits"] == first.describe()["splits"]
    assert any("mapped, encoded by an earlier run" in line for line in second.summary_lines())
    assert sorted(p.name for p in prepared_dir.iterdir()) == sorted([first.prepared.folder.name, "scans"])
    assert second.prepared.corpus.documents == first.prepared.corpus.documents


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads Linux's list of the process's mappings")
def test_the_dev_split_is_mapped_from_its_files_not_read_into_memory(corpus, prepared_dir):
    folder = module(corpus).prepared.folder  # prepared, then read back as a later run reads it
    dev = module(corpus).dev_split
    mapped = Path("/proc/self/maps").read_text()
    assert all(str(folder / f"dev.{name}") in mapped for name in ("ids", "bytes", "chars", "doc"))
    # as the files hold them, each in the narrowest dtype torch computes with: a window is made int64 as it is read
    assert [a.dtype for a in (dev.ids, dev.token_bytes, dev.token_chars, dev.token_doc)] == [torch.uint8] * 4
    assert len(dev) > 16 and (folder / "dev.ids").stat().st_size == len(dev)
    # its counts come from the manifest (summing the arrays would read every page of a large split), and are theirs
    assert dev.counts == (int(dev.token_chars.sum()), int(dev.token_bytes.sum())) and dev.chars == dev.counts[0]


def _chunk(ids, token_bytes, docs, names):
    as_tensor = lambda values: torch.tensor(values, dtype=torch.int32)  # noqa: E731
    return encoded_module.EncodedText(
        as_tensor(ids), as_tensor(token_bytes), torch.ones(len(ids), dtype=torch.uint8), as_tensor(docs), names
    )


def test_a_scored_split_is_written_in_the_narrowest_dtype_that_holds_its_values_whatever_its_chunks(tmp_path):
    chunks = [
        _chunk([3, 200], [1, 2], [0, 0], ("a",)),
        _chunk([255, 300], [4, 4], [0, 1], ("a", "b")),  # an id past uint8: ids widen to int16
        _chunk([70_000, 1], [300, 1], [0, 0], ("c",)),  # past int16, and a token of 300 bytes
    ]
    written = {}
    for name, cut in (("chunks", chunks), ("one", None)):
        folder = tmp_path / name
        folder.mkdir()
        if cut is None:  # the same split given as one chunk
            cat = lambda k: torch.cat([getattr(c, k) for c in chunks])  # noqa: E731
            doc = torch.cat([chunks[0].token_doc, chunks[1].token_doc, chunks[2].token_doc + 2])
            cut = [encoded_module.EncodedText(cat("ids"), cat("token_bytes"), cat("token_chars"), doc, ("a", "b", "c"))]
        entry = prepared_module._write_arrays(folder, cut)
        assert entry["dtypes"] == {"ids": "<i4", "bytes": "<i2", "chars": "|u1", "doc": "|u1"}
        mapped = prepared_module._mapped_arrays(folder, entry)
        assert mapped.ids.tolist() == [3, 200, 255, 300, 70_000, 1]
        assert mapped.token_bytes.tolist() == [1, 2, 4, 4, 300, 1] and mapped.token_doc.tolist() == [0, 0, 0, 1, 2, 2]
        assert mapped.documents == ("a", "b", "c") and mapped.counts == (6, 312)
        written[name] = {f.name: f.read_bytes() for f in folder.iterdir()}
    assert written["chunks"] == written["one"]  # widened files hold what one write of the whole would


def test_a_wide_file_is_widened_a_block_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(prepared_module, "_WIDEN_BLOCK", 3)
    path = tmp_path / "dev.ids"
    path.write_bytes(np.arange(10, dtype=np.uint8).tobytes())
    prepared_module._widen(path, np.dtype(np.uint8), np.dtype("<i4"))
    assert np.fromfile(path, dtype="<i4").tolist() == list(range(10)) and not list(tmp_path.glob("*.wide"))


def test_a_runs_own_tokenizer_given_back_maps_the_runs_folder(corpus, prepared_dir):
    """Scoring a checkpoint rebuilds its splits with the tokenizer it carries: when that is the one its run fitted
    (the config's folder holds the same JSON), the folder is mapped, not encoded again into a second one."""
    from tinygpt.data.tokenizers import CharTokenizer, tokenizer_from_json

    first = module(corpus)
    config = {"name": "textdir", "corpus": "dir", "path": str(corpus), "glob": "*.txt", "test_k": 1}
    config |= {"dev": "documents", "dev_k": 1, "tokenizer": {"name": "char"}}
    checkpoints = tokenizer_from_json(first.tokenizer.to_json())  # as a checkpoint gives it back
    again = TextDataModule(config, context_length=16, seed=0, tokenizer=checkpoints)
    again.setup()
    assert not again.prepared.written and again.prepared.folder == first.prepared.folder
    assert folders(prepared_dir) == [first.prepared.folder]
    other = TextDataModule(config, context_length=16, seed=0, tokenizer=CharTokenizer.fit("Document 0123456789"))
    other.setup()  # another tokenizer: its own folder
    assert other.prepared.written and len(folders(prepared_dir)) == 2


def test_folders_of_another_format_are_noted_when_a_folder_is_written_and_left_alone(corpus, prepared_dir):
    older = prepared_dir / "0123abcd"  # what a tinygpt of the format before wrote
    older.mkdir(parents=True)
    (older / MANIFEST).write_text(json.dumps({"format": "tinygpt-prepared-v2"}))
    (older / "dev.ids").write_bytes(bytes(3 * 2**20))
    note = [line for line in module(corpus).summary_lines() if line.startswith("note: 1 prepared folder(s)")]
    assert len(note) == 1 and f"under {prepared_dir} (3 MiB)" in note[0] and "tinygpt-prepared-v3" in note[0]
    assert not [line for line in module(corpus).summary_lines() if "another format" in line]  # mapped: no note
    assert (older / "dev.ids").stat().st_size == 3 * 2**20  # never deleted


def test_a_changed_file_is_scanned_and_checked_again(corpus, prepared_dir):
    module(corpus)
    (corpus / "doc2.txt").write_bytes(b"Document 2: \xff not UTF-8")
    with pytest.raises(DataError, match=r"doc2.txt: not valid UTF-8 at byte offset 12"):
        module(corpus)


def test_a_changed_corpus_or_tokenizer_is_prepared_again(corpus, prepared_dir):
    first = module(corpus)
    (corpus / "doc3.txt").write_text("changed " * 300)
    changed = module(corpus)
    assert changed.prepared.written and changed.prepared.folder != first.prepared.folder
    other = module(corpus, tokenizer="bytes")
    assert other.prepared.folder not in (first.prepared.folder, changed.prepared.folder)


def test_ids_are_uint16_when_the_vocabulary_fits_else_uint32():
    assert (ids_dtype(65_536), ids_dtype(65_537), ids_dtype(50_257)) == (np.uint16, np.uint32, np.uint16)


def test_a_damaged_folder_is_refused_in_one_line_naming_the_file(corpus, prepared_dir):
    folder = module(corpus).prepared.folder
    ids = folder / "train.ids"
    size = ids.stat().st_size
    with open(ids, "r+b") as file:
        file.truncate(size - 2)
    with pytest.raises(DataError, match=rf"^prepared file {ids} holds {size - 2:,} bytes, its manifest says"):
        module(corpus)
    manifest = json.loads((folder / MANIFEST).read_text())
    (folder / MANIFEST).write_text(json.dumps({**manifest, "format": "other-v9"}))
    with pytest.raises(DataError, match=r"is in format 'other-v9', this tinygpt reads"):
        read_prepared(folder)
    (folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"was encoded with another tokenizer than the one given"):
        read_prepared(folder, expected_tokenizer='{"chars": "xyz"}')  # a checkpoint's, not this folder's
    (folder / "tokenizer.json").write_text("{}")
    with pytest.raises(DataError, match=r"tokenizer.json does not match its manifest"):
        read_prepared(folder)


@pytest.mark.parametrize("dtypes", [{"ids": "<f8", "bytes": "|u1", "chars": "|u1", "doc": "|u1"}, None])
def test_a_manifest_with_wrong_dev_dtypes_is_refused_in_one_line(corpus, prepared_dir, dtypes):
    folder = module(corpus).prepared.folder
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest["dev"]["dtypes"] = dtypes
    (folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=rf"^prepared file {folder / MANIFEST}: its dev dtypes .* are not one of"):
        read_prepared(folder)


def test_a_prepare_that_fails_midway_leaves_no_folder_and_the_next_run_finishes_it(corpus, prepared_dir, monkeypatch):
    real = encoded_module.encode_train_chunk
    calls = []

    def fail_on_the_third_piece(tokenizer, document, text):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(tokenizer, document, text)

    monkeypatch.setattr(encoded_module, "encode_train_chunk", fail_on_the_third_piece)
    with pytest.raises(KeyboardInterrupt):
        module(corpus)
    # no prepared folder, not even the staging one (the corpus's scan is kept: it is complete)
    assert [p.name for p in prepared_dir.iterdir()] == ["scans"]
    monkeypatch.setattr(encoded_module, "encode_train_chunk", real)
    assert module(corpus).prepared.written


KILLED = """
import os, sys, time
from tinygpt.data import TextDataModule
from tinygpt.data import encoded
real = encoded.encode_train_chunk
calls = []
def slow(tokenizer, document, text):
    calls.append(1)
    if len(calls) == 3:  # the train split's second piece has been written: say so, and wait to be killed
        print("midway", flush=True)
        time.sleep(60)
    return real(tokenizer, document, text)
encoded.encode_train_chunk = slow
config = dict(name="textdir", corpus="dir", path=sys.argv[1], glob="*.txt", test_k=1, dev="documents", dev_k=1)
TextDataModule(config, context_length=16, seed=0).setup()
"""


def test_a_prepare_killed_mid_shard_reruns_to_the_same_bytes(corpus, prepared_dir, tmp_path, monkeypatch):
    env = {**os.environ, "TINYGPT_PREPARED": str(prepared_dir)}
    process = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(corpus)], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout.readline().strip() == "midway"
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    [left] = folders(prepared_dir)  # the killed prepare's staging folder, and no complete folder
    assert left.name.startswith(".") and not (left / MANIFEST).exists()
    rerun = module(corpus).prepared
    assert rerun.written and folders(prepared_dir) == [rerun.folder]  # the staging folder removed
    monkeypatch.setenv("TINYGPT_PREPARED", str(tmp_path / "fresh"))  # a prepare that was never killed
    fresh = module(corpus).prepared.folder
    for name in ("train.ids", "dev.ids", "dev.bytes", "dev.chars", "dev.doc", "tokenizer.json"):
        assert (rerun.folder / name).read_bytes() == (fresh / name).read_bytes(), name


@pytest.mark.parametrize("tokenizer", ["char", "bpe"])
def test_a_corpus_prepared_in_several_processes_is_byte_identical_to_one_prepared_in_one(
    corpus, tmp_path, monkeypatch, tokenizer
):
    """data.num_proc=3 encodes the train split's chunks in three processes (one long document in many chunks,
    and the short ones): every file of the folder, manifest included, is the same as this process's."""
    (corpus / "long.txt").write_text(
        "".join(f"line {i}: the time traveller, {i * 7 % 13} ways.\n" for i in range(3000))
    )
    monkeypatch.setattr(read_chunks, "__defaults__", (4096,))  # ~30 chunks of the long document

    def prepare(where: str, processes: int) -> dict[str, bytes]:
        monkeypatch.setenv("TINYGPT_PREPARED", str(tmp_path / where))
        folder = module(corpus, tokenizer=tokenizer, num_proc=processes).prepared.folder
        return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}

    one, several = prepare("one", 1), prepare("several", 3)
    assert several == one and len(np.frombuffer(one["train.ids"], np.uint16)) > 30_000


def test_several_processes_work_from_a_script_without_a_main_guard(corpus, prepared_dir, tmp_path):
    """A Python API user's script rarely has ``if __name__ == "__main__"``: processes that import the main module
    again (spawn) would start the prepare again in each of them, and it never finishes."""
    script = tmp_path / "my_prepare.py"
    script.write_text(
        "import sys\nfrom tinygpt.data import TextDataModule\n"
        "config = dict(name='textdir', corpus='dir', path=sys.argv[1], glob='*.txt', test_k=1, num_proc=2)\n"
        "TextDataModule(config, context_length=16, seed=0).setup()\nprint('prepared')\n"
    )
    env = {**os.environ, "TINYGPT_PREPARED": str(prepared_dir)}
    done = subprocess.run(
        [sys.executable, str(script), str(corpus)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "prepared", done.stderr[-2000:]


def test_tinygpt_prepare_writes_the_folder_a_run_then_maps(corpus, prepared_dir, tmp_path):
    """The program over the same data settings as training: the first call encodes, the second and a run's set-up
    map the same folder; a bad path is refused in one line, nothing written."""
    env = {**os.environ, "TINYGPT_PREPARED": str(prepared_dir)}
    data = ["data=textdir", f"data.path={corpus}", "data.glob=*.txt", "data.split_by=choice", "data.test_k=1"]
    data += ["data.dev=documents"]
    data += ["data.dev_k=1"]
    command = [sys.executable, str(REPO / "scripts" / "prepare.py"), *data]
    older = prepared_dir / "0123abcd"  # a folder an older tinygpt wrote: noted, not read, not deleted
    older.mkdir(parents=True)
    (older / MANIFEST).write_text(json.dumps({"format": "tinygpt-prepared-v2"}))
    first = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    [folder] = [f for f in folders(prepared_dir) if f != older]
    assert f"prepared: {folder} (encoded now)" in first.stdout and "ids stored as uint16" in first.stdout
    assert "note: 1 prepared folder(s)" in first.stdout
    again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert f"prepared: {folder} (already prepared: mapped, nothing encoded)" in again.stdout
    assert "note:" not in again.stdout
    shutil.rmtree(older)
    dm = module(corpus)
    assert dm.prepared.folder == folder and not dm.prepared.written
    bad = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "prepare.py"), "data=textfile", f"data.path={tmp_path / 'nope.txt'}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "nope.txt" in bad.stderr
    assert folders(prepared_dir) == [folder]


def test_a_live_prepares_staging_folder_is_left_alone(corpus, prepared_dir):
    """Another job preparing the same folder at this moment: its staging folder (its process alive) stays."""
    from tinygpt.data.store import remove_abandoned

    folder = module(corpus).prepared.folder
    live = prepared_dir / f".{folder.name}.{os.getpid()}.abc"
    gone = prepared_dir / f".{folder.name}.{2**22 + 12345}.abc"  # above Linux's largest pid: no such process
    live.mkdir()
    gone.mkdir()
    remove_abandoned(folder)
    assert live.is_dir() and not gone.exists()


@pytest.mark.parametrize(
    ("corpus_name", "tokenizer"),
    [
        ("timemachine", "char"),
        ("timemachine", "gpt2"),
        ("shakespeare", "char"),
        ("shakespeare", "gpt2"),
        ("peps", "char"),
    ],
)
def test_the_prepared_splits_of_the_named_corpora_are_their_texts_encoded_whole(
    corpus_name, tokenizer, prepared_dir, monkeypatch
):
    """Through the prepared path (the train split read in chunks, encoded in parts on all cores, memory-mapped),
    the train ids and every dev array (ids, bytes, characters, document) are those of encoding each split's
    documents whole, as tinygpt did before: so the dev bits per byte are the same numbers, not just close ones.
    Chunks of 64 KiB and parts of 4,096 characters here, so that every corpus is cut many times."""
    from tinygpt.data import encoded as encoded_module
    from tinygpt.data.documents import read_chunks, read_piece

    monkeypatch.setattr(read_chunks, "__defaults__", (1 << 16,))
    monkeypatch.setattr(encoded_module, "PART_CHARS", 4096)

    from conftest import compose_train

    data = compose_train([f"data={corpus_name}", f"data/tokenizer={tokenizer}"]).data
    dm = TextDataModule(data, context_length=64, seed=0)
    dm.setup("fit")
    plan, tok = dm.prepared.plan, dm.tokenizer
    whole_train = encode_segments(tok, [(p.document, read_piece(p)) for p in plan.train])
    assert np.array_equal(np.asarray(dm.train_split.tokens, dtype=np.int64), whole_train.ids.numpy())
    assert (dm.train_split.chars, dm.train_split.bytes) == (whole_train.chars, whole_train.bytes)
    whole_dev = encode_segments(tok, [(p.document, read_piece(p)) for p in plan.dev])
    for field in ("ids", "token_bytes", "token_chars", "token_doc"):
        assert torch.equal(getattr(dm.dev_split, field).long(), getattr(whole_dev, field)), field
    assert dm.dev_split.documents == whole_dev.documents


def test_a_same_size_edit_is_prepared_again_and_trains_on_the_new_text(corpus, prepared_dir):
    """A file's identity is its path, size and modification time: an edit that keeps the size (a word replaced by
    another of its length) is a new corpus, not the stale folder."""
    first = module(corpus)
    for doc in sorted(corpus.iterdir()):
        stat = doc.stat()
        doc.write_text(doc.read_text().replace("quick", "QUICK"))
        os.utime(doc, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        assert doc.stat().st_size == stat.st_size
    again = module(corpus)
    assert again.prepared.written and again.prepared.folder != first.prepared.folder
    assert "QUICK" in again.tokenizer.decode(again.train_split.ids[:2000].tolist())


@pytest.mark.parametrize(
    ("values", "dtype"),
    [
        ([5, 255], "|u1"),
        ([5, 256], "<i2"),  # one past uint8's largest
        ([-1, 5], "<i2"),  # uint8 holds no negative value
        ([5, 32_767], "<i2"),
        ([5, 32_768], "<i4"),  # one past int16's largest
        ([-32_768, 5], "<i2"),
        ([-32_769, 5], "<i4"),
    ],
)
def test_dev_arrays_never_wrap_at_a_dtypes_edge(tmp_path, values, dtype):
    chunk = _chunk(values, [1, 1], [0, 0], ("a",))
    entry = prepared_module._write_arrays(tmp_path, [chunk])
    assert entry["dtypes"]["ids"] == dtype
    assert prepared_module._mapped_arrays(tmp_path, entry).ids.tolist() == values
    assert store.fits(np.asarray(values), np.dtype(dtype))


@pytest.mark.parametrize("name", ["train.ids", "dev.ids", "dev.bytes", "dev.chars", "dev.doc"])
@pytest.mark.parametrize("change", ["longer", "shorter"])
def test_a_prepared_file_that_disagrees_with_its_manifest_is_refused_longer_or_shorter(
    corpus, prepared_dir, name, change
):
    folder = module(corpus).prepared.folder
    path = folder / name
    size = path.stat().st_size
    if change == "longer":
        with open(path, "ab") as file:
            file.write(b"\x00" * 4)
    else:
        with open(path, "r+b") as file:
            file.truncate(size - 1)
    with pytest.raises(DataError, match=rf"^prepared file {path} holds [\d,]+ bytes, its manifest says"):
        read_prepared(folder)


def test_scoring_a_run_maps_its_prepared_folder_whatever_the_paths_spelling(tmp_path, prepared_dir, monkeypatch):
    """A run started with a relative data.path, scored from another folder (where its record's absolute location
    is used): the same prepared folder, not a second one with the same train.ids (docs/data.md)."""
    from conftest import compose_train, word_salad

    from tinygpt.train.evaluate import evaluate
    from tinygpt.train.run import train

    start, elsewhere = tmp_path / "start", tmp_path / "elsewhere"
    (start / "corp").mkdir(parents=True)
    elsewhere.mkdir()
    (start / "corp" / "salad.txt").write_text(word_salad())
    monkeypatch.chdir(start)
    train(compose_train(["experiment=smoke", "data=textfile", "data.path=corp/salad.txt"]), tmp_path / "run")
    before = folders(prepared_dir)
    monkeypatch.chdir(elsewhere)
    evaluate(str(tmp_path / "run"))
    assert folders(prepared_dir) == before and len(before) == 1
