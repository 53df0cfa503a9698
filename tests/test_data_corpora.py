"""Named corpora: checksums, the real files under TINYGPT_DATA, downloads (faked: no network in tests)."""

from __future__ import annotations

import hashlib
import os
import shutil
import urllib.error
from pathlib import Path

import pytest

from tinygpt.data import DataError, TextDataModule
from tinygpt.data import download as download_module
from tinygpt.data.sources import NAMED_CORPORA, PEPS_MANIFEST, peps_manifest

DATA = os.environ.get("TINYGPT_DATA")
requires_data = pytest.mark.skipif(not DATA, reason="TINYGPT_DATA is not set (CI sets it to ../shared/data)")

TIMEMACHINE_SHA = "8424dbd9532ac81f7e5f0b6add90e6952baea29158309d7d1bf3884f4e12c516"
SHAKESPEARE_SHA = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
PEPS_MANIFEST_SHA = "3e6cb57adece06c7e8a63565a6cb858ae6dc3d0002fb365ffb69393783b9d342"  # peps/SOURCE.md


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def no_network(url: str, destination: Path) -> None:
    raise urllib.error.URLError("network is unreachable (test)")


def corpus(name: str, root=None, **extra) -> TextDataModule:
    kinds = {"peps": {"corpus": "dir", "path": "peps", "glob": "pep-*.rst", "dev": "documents"}}
    path = {"timemachine": "timemachine/timemachine.txt", "shakespeare": "tinyshakespeare/input.txt"}
    data = {"name": name, "root": root, **kinds.get(name, {"path": path.get(name)}), **extra}
    return TextDataModule(data, context_length=256, seed=0)


def test_embedded_peps_manifest_is_the_published_one():
    from importlib import resources

    manifest = resources.files("tinygpt.data").joinpath(PEPS_MANIFEST).read_bytes()
    assert hashlib.sha256(manifest).hexdigest() == PEPS_MANIFEST_SHA
    assert len(peps_manifest()) == 303 and "pep-0257.rst" in peps_manifest()


@requires_data
@pytest.mark.parametrize(
    ("name", "relative", "sha"),
    [
        ("timemachine", "timemachine/timemachine.txt", TIMEMACHINE_SHA),
        ("shakespeare", "tinyshakespeare/input.txt", SHAKESPEARE_SHA),
    ],
)
def test_single_file_corpora_load_with_their_checksums(monkeypatch, name, relative, sha):
    monkeypatch.setattr(download_module, "fetch_url", no_network)  # present files are never fetched
    assert sha256(Path(DATA) / relative) == sha
    dm = corpus(name)  # root: null -> $TINYGPT_DATA
    dm.setup()
    described = dm.describe()
    assert described["root"]["origin"] == "$TINYGPT_DATA"
    assert (
        described["corpus"]["sha256_checked"] and described["corpus"]["bytes"] == (Path(DATA) / relative).stat().st_size
    )


@requires_data
def test_peps_load_with_every_file_checked_against_the_manifest(monkeypatch):
    monkeypatch.setattr(download_module, "fetch_url", no_network)
    root = Path(DATA) / "peps"
    assert (root / "MANIFEST.sha256").read_bytes() == (
        Path(__file__).parents[1] / "tinygpt/data" / PEPS_MANIFEST
    ).read_bytes()
    assert all(sha256(root / name) == digest for name, digest in peps_manifest().items())
    dm = corpus("peps", tokenizer={"name": "bytes"})
    dm.setup()
    described = dm.describe()
    assert described["corpus"]["documents"] == 303 and described["corpus"]["bytes"] == 3_446_442
    assert len(described["held_out_documents"]) == 2 and len(described["dev_documents"]) == 10


@requires_data
def test_time_machine_has_44073_gpt2_tokens_and_000s_split():
    dm = corpus("timemachine", tokenizer={"name": "gpt2"}, split_unit="tokens", test_fraction=0)
    dm.setup()
    assert len(dm.train_split) + len(dm.dev_split) == 44_073
    assert (len(dm.train_split), len(dm.dev_split)) == (39_665, 4_408)  # first 90% / last 10% of the tokens


def copy_corpus(tmp_path: Path, relative: str) -> Path:
    target = tmp_path / relative
    target.parent.mkdir(parents=True)
    shutil.copy(Path(DATA) / relative, target)
    return target


@requires_data
def test_a_changed_file_fails_its_checksum(tmp_path):
    target = copy_corpus(tmp_path, "timemachine/timemachine.txt")
    target.write_text(target.read_text() + "one more line\n")
    with pytest.raises(
        DataError, match=r"timemachine\.txt: sha256 .* does not match the timemachine corpus as published"
    ):
        corpus("timemachine", root=str(tmp_path)).setup()


def test_offline_error_says_which_file_to_put_where(tmp_path, monkeypatch):
    monkeypatch.setattr(download_module, "fetch_url", no_network)
    with pytest.raises(DataError) as error:
        corpus("timemachine", root=str(tmp_path)).setup()
    message = str(error.value)
    assert "http://d2l-data.s3-accelerate.amazonaws.com/timemachine.txt" in message
    assert f"-> {tmp_path / 'timemachine' / 'timemachine.txt'}" in message and TIMEMACHINE_SHA in message
    assert "network is unreachable" in message and f"data.root={tmp_path}" in message
    assert "point $TINYGPT_DATA or data.root=<folder> at a folder" in message
    assert "\n" not in message  # one line
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == []  # no partial file left behind


def test_offline_error_for_peps_points_at_the_manifest(tmp_path, monkeypatch):
    monkeypatch.setattr(download_module, "fetch_url", no_network)
    with pytest.raises(DataError, match=r"303 file\(s\) missing.*and 298 more.*peps\.sha256"):
        corpus("peps", root=str(tmp_path)).setup()


def test_offline_error_for_gpt2_names_its_files(tmp_path, monkeypatch):
    monkeypatch.setattr(download_module, "fetch_url", no_network)
    (tmp_path / "book.txt").write_text("some text of my own " * 50)
    dm = TextDataModule(
        {"name": "textfile", "root": str(tmp_path), "path": "book.txt", "tokenizer": {"name": "gpt2"}},
        context_length=16,
        seed=0,
    )
    with pytest.raises(DataError, match=r"gpt2/encoder\.json(.|\n)*gpt2/vocab\.bpe"):
        dm.setup()


@requires_data
def test_download_fills_the_cache_and_checks_the_checksum(tmp_path, monkeypatch):
    relative = NAMED_CORPORA["timemachine"].path
    fetched = []

    def fake_fetch(url: str, destination: Path) -> None:
        fetched.append(url)
        shutil.copy(Path(DATA) / relative, destination)

    monkeypatch.setattr(download_module, "fetch_url", fake_fetch)
    corpus("timemachine", root=str(tmp_path)).setup()
    assert fetched == ["http://d2l-data.s3-accelerate.amazonaws.com/timemachine.txt"]
    assert sha256(tmp_path / relative) == TIMEMACHINE_SHA

    (tmp_path / relative).unlink()
    monkeypatch.setattr(download_module, "fetch_url", lambda url, dest: Path(dest).write_text("not the book"))
    with pytest.raises(DataError, match="nothing was saved"):
        corpus("timemachine", root=str(tmp_path)).setup()
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


@requires_data
def test_a_dropped_connection_is_tried_again(tmp_path, monkeypatch):
    """pooch tries a download again after a connection error; the file lands whole, checked."""
    import requests

    relative = NAMED_CORPORA["timemachine"].path
    tries = []

    def flaky_fetch(url: str, destination: Path) -> None:
        tries.append(url)
        if len(tries) == 1:
            raise requests.exceptions.ConnectionError("connection reset by peer")
        shutil.copy(Path(DATA) / relative, destination)

    monkeypatch.setattr(download_module, "fetch_url", flaky_fetch)
    monkeypatch.setattr("time.sleep", lambda seconds: None)  # pooch's wait between tries
    corpus("timemachine", root=str(tmp_path)).setup()
    assert len(tries) == 2 and sha256(tmp_path / relative) == TIMEMACHINE_SHA
    assert sorted(p.name for p in (tmp_path / "timemachine").iterdir()) == ["timemachine.txt"]  # no part files
