"""llm.c token shards: GPT-2 ids, split document by document as they are read into three files of ids in a store
(tinygpt/data/shards.py), which are its documents and its splits; copied into the prepared folder, never encoded."""

from __future__ import annotations

from pathlib import Path

from tinygpt.data.config import DataConfig
from tinygpt.data.documents import Corpus, Document, total_bytes, total_chars
from tinygpt.data.kinds.kind import CorpusKind, stored_rules
from tinygpt.data.prepared import Encoded
from tinygpt.data.records import SPLITS
from tinygpt.data.root import DataRoot
from tinygpt.data.shards import encoded_blocks, store_counts, token_store, train_chunks
from tinygpt.data.splits import SplitPlan, stored_plan
from tinygpt.data.tokenizers import build_tokenizer


class Shards(CorpusKind):
    name = "shards"
    held = "split files"
    stores_ids = True

    def documents(self, location: Path, config: DataConfig, root: DataRoot) -> list[Document]:
        store = token_store(location, config, build_tokenizer(config.tokenizer, [], root))
        counts = store_counts(store)
        return [
            Document(f"{split}.ids", store / f"{split}.ids", counts[split]["chars"], counts[split]["bytes"])
            for split in SPLITS
        ]

    def plan(self, corpus: Corpus, config: DataConfig) -> SplitPlan:
        return stored_plan(corpus, 1.0)  # data.fraction is a share of the train ids, cut as they are copied

    def split_rules(self, config: DataConfig) -> str:
        return stored_rules(config, "documents of the shards", "ids")

    def describe(self, corpus: Corpus) -> dict:
        return {"shards": store_counts(corpus.documents[0].path.parent)}

    def summary(self, corpus: Corpus) -> list[str]:
        store = corpus.documents[0].path.parent
        each = ", ".join(f"{split} {n['documents']:,}" for split, n in store_counts(store).items())
        return [f"documents of the shards: {each}, their ids written once into {store}"]

    def encode(self, config: DataConfig, corpus: Corpus, plan: SplitPlan, root: DataRoot, given) -> Encoded:
        """GPT-2 ids already: copied, with their bytes from the tables (tinygpt/data/shards.py)."""
        tokenizer = given or build_tokenizer(config.tokenizer, [], root)
        dev = encoded_blocks(plan.dev[0].path, tokenizer) if plan.dev else None
        train = train_chunks(plan.train[0].path, tokenizer, config.fraction)
        extra = {"fit_full_chars": total_chars(plan.fit_full), "fit_full_bytes": total_bytes(plan.fit_full)}
        return Encoded(tokenizer, train, dev, {**extra, "unseen_dev_chars": 0})

    def held_out(self, plan: SplitPlan, tokenizer):
        """The held-out split's ids, as they are stored."""
        return encoded_blocks(plan.test[0].path, tokenizer)
