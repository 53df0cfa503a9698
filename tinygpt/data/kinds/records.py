"""Records (JSON lines, Parquet, a Hugging Face dataset): split record by record as they are read, into three text
files in a store (tinygpt/data/records.py), which are its documents and its splits."""

from __future__ import annotations

from pathlib import Path

from tinygpt.data.config import DataConfig
from tinygpt.data.documents import Corpus, Document, scan_documents
from tinygpt.data.kinds.kind import CorpusKind, stored_rules
from tinygpt.data.records import SPLITS, record_store, store_counts
from tinygpt.data.root import DataRoot
from tinygpt.data.splits import SplitPlan, stored_plan


class Records(CorpusKind):
    name = "records"
    held = "split files"

    def documents(self, location: Path, config: DataConfig, root: DataRoot) -> list[Document]:
        store = record_store(location, config)
        return scan_documents([(f"{split}.txt", store / f"{split}.txt") for split in SPLITS])

    def plan(self, corpus: Corpus, config: DataConfig) -> SplitPlan:
        return stored_plan(corpus, config.fraction)

    def split_rules(self, config: DataConfig) -> str:
        return stored_rules(config, "records", "characters")

    def describe(self, corpus: Corpus) -> dict:
        return {"records": store_counts(corpus.documents[0].path.parent)}

    def summary(self, corpus: Corpus) -> list[str]:
        store = corpus.documents[0].path.parent
        counts = store_counts(store)
        each = ", ".join(f"{split} {n['records']:,}" for split, n in counts["splits"].items())
        return [f"records: {each} (and {counts['empty_records']:,} empty, skipped), written once into {store}"]
