"""What a corpus kind is: the small interface every kind of corpus offers the data path (tinygpt/data/kinds/)."""

from __future__ import annotations

from pathlib import Path

from tinygpt.data.config import DataConfig
from tinygpt.data.documents import Corpus, Document
from tinygpt.data.root import DataRoot
from tinygpt.data.sources import NAMED_CORPORA
from tinygpt.data.splits import SplitPlan


class CorpusKind:
    """One kind of corpus (``data.corpus``). The data path asks it these things and nothing else:

    - ``documents``: the documents it reads, found and scanned (for a kind that writes a store first, records or
      shards, its split files in the store, written once);
    - ``plan``: which text is train, dev and held out (tinygpt/data/splits.py's plans, no text read);
    - ``split_rules``, ``describe`` and ``summary``: how its splits are made, in words, what run.json records of
      it and what ``tinygpt-prepare`` prints;
    - ``dev_advice``: what makes its dev split smaller, for a run whose scoring outweighs its training.

    A kind whose store holds token ids already (``stores_ids``) is copied, not encoded (``encode``, ``held_out``).
    The corpus's identity for the prepared folder's fingerprint is its documents' files (tinygpt/data/datamodule.py's
    description of them), whatever the kind."""

    name = ""
    held = "document(s)"  # what its documents are, for tinygpt-prepare's line
    stores_ids = False
    whole_text = False  # one text read whole (a file): tinygpt-data-stats also counts it in one encoding

    def documents(self, location: Path, config: DataConfig, root: DataRoot) -> list[Document]:
        raise NotImplementedError

    def plan(self, corpus: Corpus, config: DataConfig) -> SplitPlan:
        raise NotImplementedError

    def split_rules(self, config: DataConfig) -> str:
        """How its splits are made, in words, for the run's first lines."""
        raise NotImplementedError

    def describe(self, corpus: Corpus) -> dict:
        """Extra fields for run.json's ``data`` (the store's counts)."""
        return {}

    def summary(self, corpus: Corpus) -> list[str]:
        """Extra lines for tinygpt-prepare (what was written into the store)."""
        return []

    def dev_advice(self, config: DataConfig) -> str | None:
        """What makes a large dev split smaller for this kind, or None for the general advice."""
        return None

    def encode(self, config: DataConfig, corpus: Corpus, plan: SplitPlan, root: DataRoot, given):
        """The splits as a prepared folder's contents, for a kind that stores ids (``stores_ids``); a text kind is
        encoded by the data module (tinygpt/data/datamodule.py)."""
        raise NotImplementedError

    def held_out(self, plan: SplitPlan, tokenizer):
        """The held-out split's encoded chunks, for a kind that stores ids (``stores_ids``); a text kind's held-out
        text is encoded by the data module when it is scored."""
        raise NotImplementedError


def text_rules(config: DataConfig, test: str) -> str:
    """A text kind's split rules: its held-out rule ``test``, then the dev split and the train fraction."""
    unit = "tokens" if config.split_unit == "tokens" else "characters"
    if config.dev == "tail":
        dev = f"dev = last {config.dev_fraction:.0%} of the remaining {unit}"
    elif config.dev == "documents" and config.split_by == "hash":
        dev = f"dev = the next {config.dev_fraction:.0%} of the documents by that hash"
    elif config.dev == "documents":
        dev = f"dev = {config.dev_k} whole documents chosen with split_seed={config.split_seed}"
    else:
        dev = "no dev split"
    return f"{test}; {dev}; train = first {config.fraction:.0%} of the rest ({unit})"


def stored_rules(config: DataConfig, what: str, unit: str) -> str:
    """The split rules of a kind split by a hash of its items' ids as it was read into a store."""
    dev = f"dev = the next {config.dev_fraction:.0%}" if config.dev != "none" else "no dev split"
    return (
        f"{what} by a hash of their ids (split_seed={config.split_seed}): test = {config.test_fraction:.0%} of "
        f"them; {dev}; train = the rest (the first {config.fraction:.0%} of its {unit})"
    )


def also_looked(config: DataConfig) -> str:
    """Where else a relative path of one's own was looked for (for a missing file or folder's message)."""
    if Path(config.path).expanduser().is_absolute() or config.name in NAMED_CORPORA or config.root:
        return ""
    return f", nor in the current folder ({Path.cwd()})"
