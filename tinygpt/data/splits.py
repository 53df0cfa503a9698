"""The splits: corpus -> (rest, test); rest -> (fit_full, dev); train = the first `fraction` of fit_full.

- test (held out, scored once): a file corpus holds out its tail, the last `test_fraction` of its characters;
  a directory corpus holds out whole documents, `test_documents` if listed, else a seeded choice of `test_k`, or
  with `split_by=hash` (data=textdir's rule) the documents a seeded hash of their names puts in `test_fraction`.
- dev (every choice is made on it): `tail` = the last `dev_fraction` of the rest (003's dev slice),
  `documents` = a seeded choice of `dev_k` whole documents of the rest (the better split 003 recommends),
  or `none`.
- train: the first `fraction` of fit_full (003's data-fraction runs); dev and test do not change with it.
- a records corpus (JSONL, Parquet, a dataset) was split record by record by a seeded hash of each record's id,
  as it was read (tinygpt/data/records.py): its three files are test, dev and fit_full; a shards corpus likewise,
  document by document, into three files of ids (tinygpt/data/shards.py), whose train fraction is cut in ids.

With split_unit=chars all cuts are at character positions and are planned here, before anything is read.
With split_unit=tokens (fixed tokenizers only, 000's setup) the test split is still cut here, by characters,
so that the held-out text is never tokenized at start-up; the dev tail and the train fraction are then cut at
token boundaries of the encoded rest (tinygpt/data/token_cuts.py), which is how 000 takes "the first 90% of its
tokens".

Documents are always in sorted name order; seeded choices draw from numpy's SeedSequence, so they are the same
on every machine, and the test and dev choices use separate streams of the same `split_seed`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinygpt.data.config import DataConfig
from tinygpt.data.documents import Corpus, Piece, split_pieces, total_chars, whole
from tinygpt.data.errors import DataError
from tinygpt.data.records import split_of

_TEST_STREAM, _DEV_STREAM = 0, 1


@dataclass(frozen=True)
class SplitPlan:
    """Which text goes where, as pieces of documents; no text is read to make it."""

    test: tuple[Piece, ...]  # read only by an explicit test-scoring call
    rest: tuple[Piece, ...]  # everything that is not test: fit_full + dev
    fit_full: tuple[Piece, ...]  # with split_unit=tokens and dev=tail: equal to rest until cut (token_cuts.py)
    dev: tuple[Piece, ...]
    train: tuple[Piece, ...]  # with split_unit=tokens: equal to fit_full until cut (token_cuts.py)
    test_documents: tuple[str, ...]  # dir corpora: the held-out documents, in sorted order
    dev_documents: tuple[str, ...]  # dev=documents: the dev documents, in sorted order
    cut_dev_by_tokens: bool
    cut_train_by_tokens: bool


def text_plan(
    corpus: Corpus, config: DataConfig, rest: list[Piece], test: list[Piece], test_documents: tuple[str, ...]
) -> SplitPlan:
    """The plan of a text corpus whose kind has held out ``test`` (tinygpt/data/kinds/): the dev split and the train
    fraction, cut from ``rest`` as the module's docstring says."""
    by_tokens = config.split_unit == "tokens"
    dev_documents: tuple[str, ...] = ()
    if config.dev == "none":
        fit_full, dev = rest, []
    elif config.dev == "documents":
        dev_documents = _dev_documents(rest, config) if config.split_by != "hash" else hashed(corpus, config, "dev")
        fit_full = [p for p in rest if p.document not in dev_documents]
        dev = [p for p in rest if p.document in dev_documents]
    elif by_tokens:
        fit_full, dev = rest, []
    else:
        fit_full, dev = split_pieces(rest, int(total_chars(rest) * (1 - config.dev_fraction)))

    train = fit_full if by_tokens else split_pieces(fit_full, int(total_chars(fit_full) * config.fraction))[0]
    return SplitPlan(
        test=tuple(test),
        rest=tuple(rest),
        fit_full=tuple(fit_full),
        dev=tuple(dev),
        train=tuple(train),
        test_documents=test_documents,
        dev_documents=dev_documents,
        cut_dev_by_tokens=by_tokens and config.dev == "tail",
        cut_train_by_tokens=by_tokens,
    )


def stored_plan(corpus: Corpus, fraction: float) -> SplitPlan:
    """A records or shards corpus's documents are its splits already (train, dev, test, in that order: each record
    or document went to one by the hash of its id, tinygpt/data/records.py); train is the first ``fraction`` of
    the train file's characters."""
    train_file, dev_file, test_file = (whole(d) for d in corpus.documents)
    dev = (dev_file,) if dev_file.chars else ()
    test = (test_file,) if test_file.chars else ()
    train = split_pieces([train_file], int(train_file.chars * fraction))[0]
    return SplitPlan(
        test=test,
        rest=(train_file, *dev),
        fit_full=(train_file,),
        dev=dev,
        train=tuple(train),
        test_documents=(),
        dev_documents=(),
        cut_dev_by_tokens=False,
        cut_train_by_tokens=False,
    )


def choose_documents(names: list[str], k: int, seed: int, stream: int) -> tuple[str, ...]:
    """A seeded choice of k of the names (sorted), the same on every machine for the same inputs."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, stream]))
    picked = rng.choice(len(names), size=k, replace=False)
    return tuple(sorted(names[i] for i in picked))


def held_out_documents(corpus: Corpus, config: DataConfig) -> tuple[str, ...]:
    names = [d.name for d in corpus.documents]
    if config.test_documents:
        unknown = [n for n in config.test_documents if n not in names]
        if unknown:
            raise DataError(
                f"data.test_documents: {unknown} not among the {len(names)} documents that data.glob="
                f"{config.glob!r} matches in {corpus.location} (e.g. {names[:3]})"
            )
        chosen = tuple(sorted(set(config.test_documents)))
    else:
        if config.test_k >= len(names):
            raise DataError(
                f"data.test_k={config.test_k} would hold out all {len(names)} documents of "
                f"{corpus.location}; "
                "it must leave at least one to train on"
            )
        chosen = choose_documents(names, config.test_k, config.split_seed, _TEST_STREAM)
    if len(chosen) >= len(names):
        raise DataError(f"data.test_documents holds out all {len(names)} documents; leave at least one to train on")
    return chosen


def hashed(corpus: Corpus, config: DataConfig, split: str) -> tuple[str, ...]:
    """data.split_by=hash: the documents whose seeded hash of their name (relative to the folder) falls in
    ``split``'s share (tinygpt/data/records.py's ``split_of``: test_fraction, then dev_fraction with
    dev=documents): the shares scale with the folder, and a document keeps its split as documents are added."""
    dev_fraction = config.dev_fraction if config.dev == "documents" else 0.0
    names = [d.name for d in corpus.documents]
    chosen = tuple(n for n in names if split_of(n, config.split_seed, config.test_fraction, dev_fraction) == split)
    if split == "test" and len(chosen) == len(names):
        raise DataError(
            f"data.split_by=hash holds out all {len(names)} documents of {corpus.location}; lower data.test_fraction"
        )
    return tuple(sorted(chosen))


def _dev_documents(rest: list[Piece], config: DataConfig) -> tuple[str, ...]:
    names = [p.document for p in rest]
    if config.dev_k >= len(names):
        raise DataError(
            f"data.dev_k={config.dev_k}: only {len(names)} documents remain after the held-out ones, and "
            "at least one must be left to train on; lower data.dev_k or use data.dev=tail"
        )
    return choose_documents(names, config.dev_k, config.split_seed, _DEV_STREAM)
