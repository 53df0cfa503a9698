"""TextDataModule: corpus -> splits -> tokenizer -> training batches and scoring windows.

setup() resolves the data root, checks the corpus, plans the splits, and maps the corpus's prepared folder: the
train and dev splits encoded, with the tokenizer fitted on the train split only, by the first run of this text
and tokenizer and kept for every later one (``prepare_corpus``, tinygpt/data/prepared.py). The held-out split
stays a plan (document pieces: file names and offsets) until test_dataloader() is called, the one explicit
test-scoring call, so no training or validation code can reach its text.

Validation with data.dev=none: val_dataloader() returns an empty list, which Lightning treats as "no
validation"; use the split only when nothing is to be chosen on it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Subset

from tinygpt.common.progress import Progress
from tinygpt.common.typed import typed
from tinygpt.data.batches import SAMPLER_VERSION, RandomWindows, TrainBatches
from tinygpt.data.config import DataConfig, text_settings
from tinygpt.data.corpus import open_corpus
from tinygpt.data.documents import Corpus, Piece, read_chunks, split_text, total_bytes, total_chars
from tinygpt.data.encoded import (
    PART_CHARS,
    EncodedText,
    TrainChunk,
    encode_parts,
    encode_train_chunks,
)
from tinygpt.data.errors import DataError
from tinygpt.data.kinds import corpus_kind, plan_splits
from tinygpt.data.prepared import (
    Encoded,
    PreparedSplits,
    TrainTokens,
    find_prepared,
    holds_tokenizer,
    mapped_text,
    other_formats_note,
    write_prepared,
)
from tinygpt.data.root import DataRoot, resolve_data_root
from tinygpt.data.splits import SplitPlan
from tinygpt.data.store import file_identity
from tinygpt.data.token_cuts import cut_by_tokens
from tinygpt.data.tokenizers import Tokenizer, build_tokenizer
from tinygpt.data.windows import SlidingWindowDataset


@dataclass(frozen=True)
class _Prepared:
    root: DataRoot
    corpus: Corpus
    plan: SplitPlan
    tokenizer: Tokenizer
    train: TrainTokens
    fit_full_chars: int
    fit_full_bytes: int
    dev: EncodedText | None
    unseen_dev_chars: int
    folder: Path  # the prepared folder the splits are mapped from
    written: bool  # whether this run wrote it


# a tail dev split larger than this is worth a line at start: scoring it at every check can outweigh training
LARGE_DEV_TOKENS = 500_000

# a scored split is encoded in batches of about this many characters: 4 Mi tokens at most, 64 MiB of arrays at most
SCORED_BATCH_CHARS = 1 << 22

_FIT_SAMPLE_STREAM = 2  # the seed stream of bpe's fit sample (splits.py's test and dev use 0 and 1)


def build_datamodule(config: DataConfig, context_length: int, seed: int) -> TextDataModule:
    """A run's DataModule, set up for fitting (splits made, tokenizer fitted on the training split): what train(),
    the Python API and the bench programs build."""
    L.seed_everything(seed, workers=True)
    datamodule = TextDataModule(config, context_length=context_length, seed=seed)
    datamodule.setup("fit")
    return datamodule


class TextDataModule(L.LightningDataModule):
    def __init__(self, cfg: Any, *, context_length: int, seed: int, tokenizer: Tokenizer | None = None):
        """cfg: the `data` config node (DictConfig or dict). tokenizer: reuse this one (e.g. a checkpoint's,
        to score it) instead of building or fitting one; it must be of the kind data.tokenizer names."""
        super().__init__()
        self.config = typed(DataConfig, cfg, "data", DataError)
        if isinstance(context_length, bool) or not isinstance(context_length, int) or context_length < 2:
            raise DataError(f"context_length={context_length!r}: must be an integer >= 2")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise DataError(f"seed={seed!r}: must be an integer >= 0 (it seeds the batch sampler)")
        self.context_length = context_length
        self.seed = seed
        self.start_step = 0  # the first batch index when no Trainer is attached (standalone use)
        if tokenizer is not None and tokenizer.name != self.config.tokenizer.name:
            raise DataError(
                f"the tokenizer given is a {tokenizer.name} tokenizer, but data.tokenizer.name="
                f"{self.config.tokenizer.name}"
            )
        self._given_tokenizer = tokenizer
        self._prepared: _Prepared | None = None
        self._heldout_stats: dict | None = None  # filled in by test_dataloader()

    # -- set-up ---------------------------------------------------------------------------------------------

    def prepare_data(self) -> None:
        """Fetch what a named corpus or the gpt2 tokenizer needs (Lightning calls this on one process)."""
        root = resolve_data_root(self.config.root)
        open_corpus(self.config, root)
        if self.config.tokenizer.name == "gpt2":
            build_tokenizer(self.config.tokenizer, [], root)

    def setup(self, stage: str | None = None) -> None:
        if self._prepared is not None:
            return
        root, corpus, plan, splits = prepare_corpus(self.config, self._given_tokenizer)
        extra = splits.manifest["extra"]
        self._check_window("train", len(splits.train), corpus)
        if splits.dev is not None:
            self._check_window("dev", len(splits.dev), corpus)
        # no tokenizer has more tokens than bytes (a shards corpus's held-out ids are counted when they are scored)
        if plan.test and not corpus_kind(corpus.kind).stores_ids and total_bytes(plan.test) < self.context_length + 1:
            raise DataError(
                f"the held-out split of {corpus.location} has {total_bytes(plan.test)} bytes, fewer than one "
                f"window of {self.context_length + 1} tokens; raise data.test_fraction / choose longer test "
                "documents, or set data.test_fraction=0 / data.test_k=0 for no held-out split"
            )
        self._prepared = _Prepared(
            root,
            corpus,
            plan,
            splits.tokenizer,
            splits.train,
            extra["fit_full_chars"],
            extra["fit_full_bytes"],
            splits.dev,
            extra["unseen_dev_chars"],
            splits.folder,
            splits.written,
        )

    def _check_window(self, split: str, tokens: int, corpus: Corpus) -> None:
        if tokens < self.context_length + 1:
            raise DataError(
                f"the {split} split of {corpus.location} has {tokens} tokens, fewer than one window of "
                f"context_length + 1 = {self.context_length + 1}; use a longer corpus, a shorter context, or "
                f"change the split sizes (data.dev_fraction, data.fraction, data.test_fraction)"
            )

    @property
    def prepared(self) -> _Prepared:
        """Everything setup() builds; set up on first use, so vocab_size etc. work before the Trainer runs."""
        if self._prepared is None:
            self.setup()
        assert self._prepared is not None
        return self._prepared

    # -- what the model and the run need --------------------------------------------------------------------

    @property
    def tokenizer(self) -> Tokenizer:
        return self.prepared.tokenizer

    @property
    def vocab_size(self) -> int:
        return self.prepared.tokenizer.vocab_size

    @property
    def has_dev(self) -> bool:
        """Whether there is a dev split to validate on (data.dev is not none); known before setup()."""
        return self.config.dev != "none"

    @property
    def train_batches(self) -> RandomWindows:
        """The training batch function, batch(step) -> (x, y), for loops that do not use a Trainer."""
        return RandomWindows(self.prepared.train.tokens, self.config.batch_size, self.context_length, self.seed)

    @property
    def train_split(self) -> TrainTokens:
        return self.prepared.train

    @property
    def dev_split(self) -> EncodedText | None:
        return self.prepared.dev

    @property
    def dev_documents(self) -> tuple[str, ...]:
        """Documents of the dev split, in order: BitsPerByte(n_documents=len(...)) indexes them."""
        dev = self.prepared.dev
        return dev.documents if dev is not None else ()

    @property
    def test_documents(self) -> tuple[str, ...]:
        """Documents of the held-out split, in order (names only; nothing is read)."""
        return tuple(piece.document for piece in self.prepared.plan.test)

    # -- loaders -------------------------------------------------------------------------------------

    def _batch_index(self) -> int:
        """Index of the next training batch. With a Trainer it is derived from the (restored) global step,
        so a resumed run continues the same stream; an optimizer step consumes accumulate_grad_batches."""
        trainer = self.trainer
        if trainer is None:
            return self.start_step
        return trainer.global_step * trainer.accumulate_grad_batches

    def train_dataloader(self) -> DataLoader:
        trainer = self.trainer
        windows = RandomWindows(
            self.prepared.train.tokens,
            self.config.batch_size,
            self.context_length,
            self.seed,
            rank=trainer.global_rank if trainer is not None else 0,
            world_size=trainer.world_size if trainer is not None else 1,
        )
        # generator=: a DataLoader draws a base seed each time it is iterated; from the global RNG that would
        # shift dropout's random stream and break exact resume
        return DataLoader(
            TrainBatches(windows, start=self._batch_index),
            batch_size=None,
            num_workers=0,
            generator=torch.Generator(),
            pin_memory=self._pin_memory,
        )

    @property
    def _pin_memory(self) -> bool:
        """Pinned host memory for a run on CUDA: Lightning then copies each batch to the GPU without blocking
        (pinned memory is what makes a non-blocking copy asynchronous). The CPU and MPS have nothing to pin."""
        trainer = self.trainer
        return trainer is not None and trainer.strategy.root_device.type == "cuda"

    def _windows_loader(self, encoded: EncodedText) -> DataLoader:
        dataset = SlidingWindowDataset(
            encoded.ids, encoded.token_bytes, encoded.token_chars, self.context_length, encoded.token_doc
        )
        trainer = self.trainer
        if trainer is not None and trainer.world_size > 1:
            # Under DDP each rank scores every world_size-th window and the metric sums the ranks: each window
            # exactly once. (Lightning's DistributedSampler would pad with repeated windows, counted twice.)
            dataset = Subset(dataset, range(trainer.global_rank, len(dataset), trainer.world_size))
        return DataLoader(
            dataset,
            batch_size=self.config.eval_batch_size,
            shuffle=False,
            num_workers=0,
            generator=torch.Generator(),
            pin_memory=self._pin_memory,
        )  # not the global RNG (see train_dataloader)

    def val_dataloader(self) -> DataLoader | list:
        dev = self.prepared.dev
        return [] if dev is None else self._windows_loader(dev)

    def test_dataloader(self) -> DataLoader:
        """The held-out split's scoring windows. This is the only place its text is read: call it once, to
        score the run's final model."""
        plan = self.prepared.plan
        if not plan.test:
            raise DataError(
                "this data config has no held-out split (data.test_fraction=0 or data.test_k=0 with no "
                "data.test_documents); score the dev split instead"
            )
        counts = {"unseen_chars": 0}
        kind = corpus_kind(self.prepared.corpus.kind)
        if kind.stores_ids:  # ids already (tinygpt/data/kinds/shards.py)
            test = mapped_text(kind.held_out(plan, self.tokenizer))
        else:  # a chunk at a time into a scratch file, mapped (tinygpt/data/prepared.py's mapped_text)
            test = mapped_text(_encoded_split(self.tokenizer, plan.test, counts, "unseen_chars"))
        unseen = counts["unseen_chars"]
        self._check_window("held-out", len(test), self.prepared.corpus)
        self._heldout_stats = {"tokens": len(test), "unseen_chars": unseen, "documents": list(test.documents)}
        return self._windows_loader(test)

    # -- checkpointing -------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        # The batch stream is a function of (seed, step); the step is in Lightning's own loop state.
        return {"seed": self.seed, "sampler": SAMPLER_VERSION}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        sampler = state_dict.get("sampler")
        if sampler != SAMPLER_VERSION:
            raise DataError(
                f"the checkpoint's batch sampler is {sampler!r}, this tinygpt draws batches with "
                f"{SAMPLER_VERSION!r}; the resumed run would not continue the same batch stream"
            )
        if state_dict.get("seed") != self.seed:
            raise DataError(
                f"resuming a run that drew its batches with seed={state_dict.get('seed')} using "
                f"seed={self.seed}; "
                "set the run's seed back to the checkpoint's to continue its batch stream"
            )

    # -- reporting -----------------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """A JSON-serializable summary of the corpus, the splits and the tokenizer, for the run's records."""
        p, config = self.prepared, self.config
        splits: dict[str, Any] = {
            "train": _split_summary(p.train.documents, p.train.chars, p.train.bytes, len(p.train)),
            "fit_full": _split_summary(
                tuple(dict.fromkeys(piece.document for piece in p.plan.fit_full)),
                p.fit_full_chars,
                p.fit_full_bytes,
                None,  # not encoded as a whole unless split_unit=tokens; train is what the model sees
            ),
            "dev": None if p.dev is None else _split_summary(p.dev.documents, p.dev.chars, p.dev.bytes, len(p.dev)),
            "test": None,
        }
        if p.plan.test:
            held = self._heldout_stats or {}
            splits["test"] = _split_summary(
                self.test_documents, total_chars(p.plan.test), total_bytes(p.plan.test), held.get("tokens")
            )
            splits["test"]["unseen_chars"] = held.get("unseen_chars")  # None until the held-out split is scored
        return {
            "corpus": {
                "name": p.corpus.name,
                "kind": p.corpus.kind,
                "location": str(p.corpus.location),
                "found_in": p.corpus.found_in,
                "documents": len(p.corpus.documents),
                "chars": p.corpus.chars,
                "bytes": p.corpus.bytes,
                "sha256_checked": p.corpus.checksummed,
            },
            "root": {"path": str(p.root.path), "origin": p.root.origin},
            "prepared": str(p.folder),
            "tokenizer": {"name": p.tokenizer.name, "vocab_size": p.tokenizer.vocab_size},
            "vocab_size": p.tokenizer.vocab_size,
            "context_length": self.context_length,
            "seed": self.seed,
            "settings": {
                "split_unit": config.split_unit,
                "test_fraction": config.test_fraction,
                "test_documents": list(config.test_documents),
                "test_k": config.test_k,
                "split_seed": config.split_seed,
                "dev": config.dev,
                "dev_fraction": config.dev_fraction,
                "dev_k": config.dev_k,
                "split_by": config.split_by,
                "fraction": config.fraction,
            },
            "train_fraction": config.fraction,
            **corpus_kind(p.corpus.kind).describe(p.corpus),  # a store's counts (tinygpt/data/kinds/)
            "held_out_documents": list(p.plan.test_documents),
            "dev_documents": list(p.plan.dev_documents),
            "splits": splits,
            "unseen_dev_chars": p.unseen_dev_chars,
        }

    def _fitted_on(self, splits: dict) -> str:
        """What the tokenizer was fitted on, for the run's first lines (a checkpoint's given one: fixed)."""
        fit_bytes = self.config.tokenizer.fit_bytes if self._given_tokenizer is None else None
        return _fitted_on_line(self.tokenizer, fit_bytes, splits["train"]["bytes"])

    def summary_lines(self) -> list[str]:
        """Human-readable lines for the run to print at start."""
        d, config = self.describe(), self.config
        corpus, splits = d["corpus"], d["splits"]
        checked = "sha256 checked" if corpus["sha256_checked"] else "no checksum (user corpus)"
        # a records or shards corpus's documents are its three split files (their records or documents: below)
        held = "split files" if corpus["kind"] in ("records", "shards") else "document(s)"
        lines = [
            f"data: {corpus['name']} ({corpus['kind']} {corpus['location']}, from {corpus['found_in']}, "
            f"{corpus['documents']:,} {held}, "
            f"{corpus['chars']:,} chars, {corpus['bytes']:,} bytes, {checked})",
            f"tokenizer: {d['tokenizer']['name']}, vocabulary {d['vocab_size']:,}" + self._fitted_on(splits),
            "splits: " + corpus_kind(config.corpus).split_rules(config),
        ]
        how = "encoded now, kept for later runs" if self.prepared.written else "mapped, encoded by an earlier run"
        lines.insert(2, f"prepared: {self.prepared.folder} ({how})")
        note = other_formats_note(self.prepared.folder.parent) if self.prepared.written else None
        for name in ("train", "dev", "test"):
            split = splits[name]
            if split is None:
                lines.append(f"  {name:5s}: none")
                continue
            tokens = "not read until test scoring" if split["tokens"] is None else f"{split['tokens']:,} tokens"
            docs = split["documents"]
            more = f", ... ({len(docs):,} in all: run.json lists them)" if len(docs) > 8 else ""
            listed = ", ".join(docs[:8]) + more
            shown = "" if corpus["kind"] != "dir" or name == "train" else f"; documents {listed}"
            if "records" in d:
                count = f"{d['records']['splits'][name]['records']:,} records"
            elif "shards" in d:
                count = f"{d['shards'][name]['documents']:,} documents of the shards"
            else:
                count = f"{len(docs)} document(s)"
            lines.append(f"  {name:5s}: {split['chars']:,} chars, {split['bytes']:,} bytes, {tokens}, {count}{shown}")
        if config.tokenizer.name == "char" and splits["dev"] is not None:
            lines.append(f"  dev characters unseen in train (id 0): {d['unseen_dev_chars']:,}")
        dev = splits["dev"]
        if dev is not None and dev["tokens"] is not None and dev["tokens"] > LARGE_DEV_TOKENS:
            lines.append(_large_dev_note(dev["tokens"], corpus["kind"], config))
        return lines if note is None else [*lines, note]


def _large_dev_note(tokens: int, kind: str, config: DataConfig) -> str:
    """The start line for a dev split whose scoring can outweigh training: what makes it smaller, for this corpus.
    Lightning's limit_val_batches scores the same first batches at every check (the windows are not shuffled), so
    the checks stay comparable with each other, though not with a run that scores the whole split."""
    advice = corpus_kind(kind).dev_advice(config)
    if advice is not None:
        smaller = advice
    elif config.dev == "documents" and config.split_by != "hash":
        smaller = "keep fewer documents: data.dev_k=<how many>"
    else:
        smaller = "hold out a smaller share: data.dev_fraction=<share>"
    return (
        f"note: dev holds {tokens:,} tokens (over {LARGE_DEV_TOKENS:,}), each scored at every dev check; "
        f"{smaller}, or score its first N batches at every check: +trainer.limit_val_batches=N"
    )


def _fitted_on_line(tokenizer: Tokenizer, fit_bytes: int | None, train_bytes: int) -> str:
    if not tokenizer.needs_fitting:
        return " (fixed)"
    if fit_bytes and train_bytes > fit_bytes:
        return (
            f" (fitted on a seeded sample of about {fit_bytes / 2**20:,.0f} MiB of the train split's "
            f"{train_bytes / 2**20:,.0f} MiB: data.tokenizer.fit_bytes)"
        )
    return " (fitted on the train split only)"


def _split_summary(documents, chars: int, n_bytes: int, tokens: int | None) -> dict[str, Any]:
    return {"documents": list(documents), "chars": chars, "bytes": n_bytes, "tokens": tokens}


def prepare_corpus(
    config: DataConfig, tokenizer: Tokenizer | None = None
) -> tuple[DataRoot, Corpus, SplitPlan, PreparedSplits]:
    """The corpus opened, its splits planned, and its train and dev splits encoded: mapped from their prepared
    folder when one exists for this text and tokenizer (tinygpt/data/prepared.py), else encoded now and written
    there for every later run (what ``tinygpt-prepare`` does, and every run's set-up). tokenizer: a given one (a
    checkpoint's), else the config's, fitted on the train split."""
    root = resolve_data_root(config.root)
    corpus = open_corpus(config, root)
    plan = plan_splits(corpus, config)
    if not plan.train:
        raise DataError(f"the train split of {corpus.location} is empty; check data.fraction and the split sizes")
    if config.dev != "none" and not (plan.dev or plan.cut_dev_by_tokens):
        raise DataError(f"the dev split of {corpus.location} is empty; raise data.dev_fraction or data.dev_k")
    given = None if tokenizer is None else tokenizer.to_json()
    description = _description(config, corpus, tokenizer)
    if given is not None and holds_tokenizer(_description(config, corpus, None), given):
        # a checkpoint's tokenizer is the one its run fitted and wrote into the config's folder: that folder is these
        # splits encoded with it, so scoring a run maps it instead of encoding the corpus again into a second one
        description = _description(config, corpus, None)
    splits = find_prepared(description, given)
    if splits is None:  # the first run over this text: encode it, a chunk at a time as it is written
        splits = write_prepared(description, _encode(config, corpus, plan, root, tokenizer), given)
    return root, corpus, plan, splits


def _description(config: DataConfig, corpus: Corpus, given: Tokenizer | None) -> dict[str, Any]:
    """What decides the encoded splits (tinygpt/data/prepared.py's fingerprint): the corpus's files as they are on
    disk, the settings that decide each split's text and unit, and the tokenizer's config (or, for a tokenizer
    given from a checkpoint, the tokenizer itself)."""
    tokenizer = {"name": config.tokenizer.name, "vocab_size": config.tokenizer.vocab_size}
    fit_bytes = config.tokenizer.fit_bytes
    if fit_bytes and corpus.bytes > fit_bytes:  # bpe's fit sample decides its merges (a smaller corpus: the whole)
        tokenizer.update(fit_bytes=fit_bytes, sample_seed=config.split_seed)
    return {
        "files": file_identity([document.path for document in corpus.documents]),
        "documents": [document.name for document in corpus.documents],
        # data.path as typed is left out: the files above are named by where they are, so a run started with
        # data.path=corp/s.txt and a scoring of it from another folder (an absolute path) share one folder
        "text": {key: value for key, value in text_settings(config).items() if key != "data.path"},
        "split_unit": config.split_unit,
        "tokenizer": tokenizer if given is None else {"given": hashlib.sha256(given.to_json().encode()).hexdigest()},
    }


def _encode(config: DataConfig, corpus: Corpus, plan: SplitPlan, root: DataRoot, given: Tokenizer | None) -> Encoded:
    """The splits encoded from the corpus (a prepared folder's contents): the tokenizer fitted on the train split
    only, then the train and dev splits a chunk at a time; a shards corpus's ids as they are."""
    kind = corpus_kind(corpus.kind)
    if kind.stores_ids:  # ids already: copied, not encoded (tinygpt/data/kinds/shards.py)
        return kind.encode(config, corpus, plan, root, given)
    if plan.cut_train_by_tokens:  # split_unit=tokens: a fixed tokenizer, then cuts at token boundaries
        tokenizer = given or build_tokenizer(config.tokenizer, [], root)
        tail = config.dev_fraction if plan.cut_dev_by_tokens else None
        cut = cut_by_tokens(tokenizer, _chunks(plan.fit_full), tail, config.fraction, config.num_proc)
        extra = {"fit_full_chars": cut.fit_full_chars, "fit_full_bytes": cut.fit_full_bytes, "unseen_dev_chars": 0}
        dev = cut.dev if plan.cut_dev_by_tokens else None
        if plan.dev:  # dev=documents: whole documents, encoded as the chars unit's are
            dev = _encoded_split(tokenizer, plan.dev, extra, "unseen_dev_chars")
        return Encoded(tokenizer, cut.train, dev, extra)
    # the train split is read twice from disk, a chunk at a time (tinygpt/data/documents.py's read_chunks): once to
    # fit the tokenizer, once to encode it; the dev split once, to encode it. Memory holds a chunk and its encoding,
    # whatever the corpus's size
    tokenizer = given or build_tokenizer(config.tokenizer, _fit_texts(plan.train, config), root)
    extra = {
        "fit_full_chars": total_chars(plan.fit_full),
        "fit_full_bytes": total_bytes(plan.fit_full),
        "unseen_dev_chars": 0,  # counted as the dev split is encoded, before the manifest is written
    }
    progress = Progress("encoding the train split", total_bytes(plan.train), unit="bytes", rate=True)
    train = _encoded_chunks(tokenizer, plan.train, progress, config.num_proc)
    dev = _encoded_split(tokenizer, plan.dev, extra, "unseen_dev_chars") if plan.dev else None
    return Encoded(tokenizer, train, dev, extra)


def _encoded_split(tokenizer: Tokenizer, pieces: tuple[Piece, ...], counts: dict, unseen: str) -> Iterator[EncodedText]:
    """A scored split (dev, held-out) with every token's bytes, characters and document, in batches of about
    SCORED_BATCH_CHARS (one ``encode_many_arrays`` call each, on all cores): each chunk cut into parts where no
    token crosses (``split_text``, as the train split's), so a batch's four arrays (``encode_parts``) stay near
    64 MiB whatever the length of a document; adds its characters unseen by the tokenizer to ``counts[unseen]``. A
    document read in several chunks and parts is one document (one index in all)."""
    batch: list[tuple[str, str]] = []
    size = 0
    for name, chunk in _chunks(pieces):
        for text in split_text(chunk, PART_CHARS):
            batch.append((name, text))
            size += len(text)
            if size >= SCORED_BATCH_CHARS:
                yield _counted(encode_parts(tokenizer, batch), tokenizer, counts, unseen)
                batch, size = [], 0
    if batch:
        yield _counted(encode_parts(tokenizer, batch), tokenizer, counts, unseen)


def _counted(encoded: EncodedText, tokenizer: Tokenizer, counts: dict, unseen: str) -> EncodedText:
    counts[unseen] += tokenizer.unseen_in(encoded.ids.numpy())
    return encoded


def _chunks(pieces: tuple[Piece, ...]) -> Iterator[tuple[str, str]]:
    """(document name, text) of each piece in order, a long piece in several chunks (read_chunks)."""
    for piece in pieces:
        for text in read_chunks(piece):
            yield piece.document, text


def _fit_texts(pieces: tuple[Piece, ...], config: DataConfig) -> Iterator[str]:
    """What the tokenizer is fitted on: ``_fitted_chunks``, each cut into parts of about PART_CHARS where no
    pre-token crosses (``split_text``, as for encoding). The trainer counts the same words, so the merges are the
    same, and ``tokenizers``' trainer counts the parts on every core, where a few whole chunks of several MiB left
    a core idle (docs/benchmarks/README.md)."""
    for chunk in _fitted_chunks(pieces, config):
        yield from split_text(chunk, PART_CHARS)


def _fitted_chunks(pieces: tuple[Piece, ...], config: DataConfig) -> Iterator[str]:
    """The train split's chunks, or for bpe with a split larger than ``data.tokenizer.fit_bytes`` a seeded sample of
    them (a document, or up to 32 MiB of a long one), each kept with probability fit_bytes / the split's bytes by a
    generator seeded with ``data.split_seed``: about fit_bytes in all, the same on every machine; the first chunk
    when the draw keeps none."""
    fit_bytes = config.tokenizer.fit_bytes
    split_bytes = total_bytes(pieces)
    if not fit_bytes or split_bytes <= fit_bytes:
        yield from (text for _, text in _chunks(pieces))
        return
    rng = np.random.default_rng(np.random.SeedSequence([config.split_seed, _FIT_SAMPLE_STREAM]))
    first: str | None = None
    kept = False
    for index, (_, text) in enumerate(_chunks(pieces)):
        if rng.random() < fit_bytes / split_bytes:
            kept = True
            yield text
        elif index == 0:
            first = text  # fitted on at the end if the draw keeps nothing (the trainer counts, order aside)
    if not kept and first is not None:
        yield first


def _encoded_chunks(
    tokenizer: Tokenizer, pieces: tuple[Piece, ...], progress: Progress, processes: int
) -> Iterator[TrainChunk]:
    """The train split's chunks encoded (encode_train_chunks), saying how far: bytes, the document being encoded,
    the time left and the bytes a second."""
    documents = len(dict.fromkeys(piece.document for piece in pieces))
    done = document = 0
    last = None
    for chunk in encode_train_chunks(tokenizer, _chunks(pieces), processes):
        yield chunk
        done += chunk.bytes
        document += sum(1 for name in chunk.documents if name != last)  # a long document comes in several chunks
        last = chunk.documents[-1]
        progress.update(done, f"document {document:,} of {documents:,}")
