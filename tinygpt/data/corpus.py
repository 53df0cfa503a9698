"""Find a corpus under the data root, fetch and checksum it if it is a named one, and list its documents.

Where: a named corpus lives under the data root. Your own (``data=textfile`` / ``textdir``) is found where you
mean it: an absolute ``data.path`` as given; a relative one under ``data.root`` when you gave one, else in the
current folder when it exists there (the README's ``data.path=my.txt``), else under the data root
($TINYGPT_DATA or the cache). The run's first lines and run.json say which.

What its documents are is its kind's to say (tinygpt/data/kinds/): a file is one document; a folder the files
matching `data.glob`, in sorted name order; records and shards the three split files they are read into.
"""

from __future__ import annotations

from pathlib import Path

from tinygpt.data.config import DataConfig
from tinygpt.data.documents import Corpus, Document
from tinygpt.data.download import ensure_files, sha256_of
from tinygpt.data.errors import DataError
from tinygpt.data.kinds import corpus_kind
from tinygpt.data.root import DataRoot
from tinygpt.data.sources import GENERIC_CORPORA, NAMED_CORPORA, NamedCorpus


def corpus_location(config: DataConfig, root: DataRoot) -> tuple[Path, str]:
    """(where the corpus is, where it was found): see the module's docstring."""
    path = Path(config.path).expanduser()
    if path.is_absolute():
        return path, "data.path"
    if config.name not in NAMED_CORPORA and config.root in (None, "") and path.exists():
        return path.resolve(), "the current folder"
    return root.resolve(path), f"the data root ({root.origin})"


def open_corpus(config: DataConfig, root: DataRoot) -> Corpus:
    named = _named_corpus(config)
    location, found_in = corpus_location(config, root)
    at_registered_place = named is not None and location == root.resolve(named.path)
    if at_registered_place:
        # Fetch what is missing, and check the sha256 of every file of the corpus.
        ensure_files(root, named.files, f"the {named.name} corpus")
    documents = corpus_kind(config.corpus).documents(location, config, root)  # tinygpt/data/kinds/
    if named is not None:
        _check_against_published(named, documents, hash_files=not at_registered_place)
    corpus = Corpus(config.name, config.corpus, location, tuple(documents), named is not None, found_in)
    if corpus.chars == 0:
        raise DataError(f"the corpus at {location} (data.path={config.path}) is empty: no text to train on")
    return corpus


def _named_corpus(config: DataConfig) -> NamedCorpus | None:
    if config.name in NAMED_CORPORA:
        named = NAMED_CORPORA[config.name]
        if config.corpus != named.kind:
            raise DataError(f"data.name={config.name} is a {named.kind} corpus, but data.corpus={config.corpus}")
        return named
    if config.name in GENERIC_CORPORA:
        if config.corpus != GENERIC_CORPORA[config.name]:
            raise DataError(
                f"data.name={config.name} reads a {GENERIC_CORPORA[config.name]} corpus, but "
                f"data.corpus={config.corpus}; use data={_generic_of(config.corpus)}"
            )
        return None
    known = sorted(NAMED_CORPORA) + sorted(GENERIC_CORPORA)
    raise DataError(
        f"data.name={config.name!r}: unknown corpus; choose one of {known} (textfile, textdir, jsonl, parquet, hf "
        "and llmc read your own text)"
    )


def _check_against_published(named: NamedCorpus, documents: list[Document], *, hash_files: bool) -> None:
    """Every document of a named corpus must be one of its published files; a named corpus read from somewhere
    other than its registered place (hash_files) is checksummed here, since ensure_files did not see it."""
    expected = {Path(remote.relative_path).name: remote.sha256 for remote in named.files}
    for document in documents:
        key = Path(document.name).name
        if key not in expected:
            raise DataError(
                f"{document.path} is not part of the published {named.name} corpus ({named.source}); "
                "narrow data.glob, or use data=textdir for your own documents"
            )
        if not hash_files:
            continue
        actual = sha256_of(document.path)
        if actual != expected[key]:
            raise DataError(
                f"{document.path}: sha256 {actual} does not match the published {named.name} corpus "
                f"({expected[key]}); restore the file, or use data=textfile/textdir for your own text"
            )


def recorded_data(record: dict) -> dict:
    """The ``data`` settings a run recorded (run.json), for the programs that rebuild its splits (evaluate, analyze,
    baselines' ``lstm_run=``): a relative ``data.path`` of one's own is replaced by where the run found its corpus
    (``data.corpus.location``) when that still exists, since the run may have been started in another folder."""
    data = dict(record["config"]["data"])
    found = ((record.get("data") or {}).get("corpus") or {}).get("location")
    relative = not Path(str(data.get("path"))).expanduser().is_absolute()
    if found and relative and data.get("name") not in NAMED_CORPORA and Path(found).exists():
        data["path"] = found
    return data


def _generic_of(kind: str) -> str:
    """The generic corpus (data=...) that reads a kind: textfile for file, textdir for dir, ..."""
    return next(name for name, of in GENERIC_CORPORA.items() if of == kind)
