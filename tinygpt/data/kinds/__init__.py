"""The kinds of corpus (``data.corpus``), one class each, registered here by name: the one place the data path
asks which kind a corpus is.

Adding a kind is one file and one line: a ``CorpusKind`` subclass (tinygpt/data/kinds/kind.py says what it offers:
its documents, its split plan, what run.json and tinygpt-prepare say of it) in a file of its own, and its entry in
``KINDS``. A kind that reads its source once into a store of split files (as records and shards do) writes the
store in its ``documents`` with tinygpt/data/store.py's staging and fingerprints, and plans with
tinygpt/data/splits.py's ``stored_plan``; a text kind holds out its test split and leaves the rest to
``text_plan``. ``data.corpus`` takes the names here (tinygpt/data/config.py checks them against ``CORPUS_KINDS``,
which must list the same).
"""

from __future__ import annotations

from tinygpt.data.config import DataConfig
from tinygpt.data.documents import Corpus
from tinygpt.data.errors import DataError
from tinygpt.data.kinds.kind import CorpusKind
from tinygpt.data.kinds.records import Records
from tinygpt.data.kinds.shards import Shards
from tinygpt.data.kinds.text_dir import TextDir
from tinygpt.data.kinds.text_file import TextFile
from tinygpt.data.splits import SplitPlan

KINDS: dict[str, CorpusKind] = {kind.name: kind for kind in (TextFile(), TextDir(), Records(), Shards())}


def corpus_kind(name: str) -> CorpusKind:
    if name not in KINDS:
        raise DataError(f"data.corpus={name!r}: not a kind of corpus; choose one of {sorted(KINDS)}")
    return KINDS[name]


def plan_splits(corpus: Corpus, config: DataConfig) -> SplitPlan:
    """Which text of the corpus is train, dev and held out, as its kind plans it (no text is read)."""
    return corpus_kind(corpus.kind).plan(corpus, config)
