"""The named corpora and GPT-2's tokenizer files: where each file lives under the data root, where it was
published, and its sha256 (from each corpus's SOURCE.md in the shared data root).

A named corpus is a promise that everyone who says `data=timemachine` trains on the same bytes, so every file
is checked against its checksum before use. Users' own text goes through the generic `textfile` and `textdir`
corpora, which have no checksums and are never downloaded.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources

PEPS_COMMIT = "ba4deeb7969588d937da609008d05bb83a47b1ab"
PEPS_MANIFEST = "manifests/peps.sha256"  # package data of tinygpt.data: `sha256sum pep-*.rst` at PEPS_COMMIT


@dataclass(frozen=True)
class RemoteFile:
    relative_path: str  # where the file belongs under the data root
    url: str  # its public source
    sha256: str


@dataclass(frozen=True)
class NamedCorpus:
    name: str
    kind: str  # "file" or "dir"
    path: str  # the file, or the directory of documents, relative to the data root
    glob: str | None  # dir corpora: the documents
    source: str  # one line for messages and docs
    list_files: Callable[[], tuple[RemoteFile, ...]]  # its files and checksums (a function: the PEPs read a manifest)

    @property
    def files(self) -> tuple[RemoteFile, ...]:
        return self.list_files()


def _timemachine_files() -> tuple[RemoteFile, ...]:
    return (
        RemoteFile(
            "timemachine/timemachine.txt",
            "http://d2l-data.s3-accelerate.amazonaws.com/timemachine.txt",
            "8424dbd9532ac81f7e5f0b6add90e6952baea29158309d7d1bf3884f4e12c516",
        ),
    )


def _shakespeare_files() -> tuple[RemoteFile, ...]:
    return (
        RemoteFile(
            "tinyshakespeare/input.txt",
            "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt",
            "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
        ),
    )


@functools.cache
def peps_manifest() -> dict[str, str]:
    """File name -> sha256 for the 303 PEPs of the corpus, read from the manifest shipped with the package."""
    text = resources.files("tinygpt.data").joinpath(PEPS_MANIFEST).read_text(encoding="utf-8")
    manifest = {}
    for line in text.splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            manifest[name.strip().lstrip("*")] = digest
    return manifest


def _peps_files() -> tuple[RemoteFile, ...]:
    base = f"https://raw.githubusercontent.com/python/peps/{PEPS_COMMIT}/peps"
    return tuple(
        RemoteFile(f"peps/{name}", f"{base}/{name}", digest) for name, digest in sorted(peps_manifest().items())
    )


# data.name's named corpora (data/corpus.py checks names against these keys and GENERIC_CORPORA's). Adding a
# corpus: an entry here, its files function above, and conf/data/<name>.yaml.
NAMED_CORPORA: dict[str, NamedCorpus] = {
    "timemachine": NamedCorpus(
        "timemachine",
        "file",
        "timemachine/timemachine.txt",
        None,
        "H. G. Wells, The Time Machine (d2l's copy)",
        _timemachine_files,
    ),
    "shakespeare": NamedCorpus(
        "shakespeare",
        "file",
        "tinyshakespeare/input.txt",
        None,
        "tiny Shakespeare (karpathy/char-rnn)",
        _shakespeare_files,
    ),
    "peps": NamedCorpus(
        "peps",
        "dir",
        "peps",
        "pep-*.rst",
        f"303 public-domain PEPs from python/peps@{PEPS_COMMIT[:12]}",
        _peps_files,
    ),
}

# The generic corpora for users' own text, with the corpus kind each one implies.
# your own text: a file, a folder of files, or records (tinygpt/data/records.py's READERS)
GENERIC_CORPORA = {
    "textfile": "file",
    "textdir": "dir",
    "jsonl": "records",
    "parquet": "records",
    "hf": "records",
    "llmc": "shards",
}

GPT2_FILES = (
    RemoteFile(
        "gpt2/encoder.json",
        "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/encoder.json",
        "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    ),
    RemoteFile(
        "gpt2/vocab.bpe",
        "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/vocab.bpe",
        "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
    ),
)
