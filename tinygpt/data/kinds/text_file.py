"""A text file: one document; its held-out split is its tail (the last ``data.test_fraction`` of its characters)."""

from __future__ import annotations

from pathlib import Path

from tinygpt.data.config import DataConfig
from tinygpt.data.documents import Corpus, Document, scan_documents, split_pieces, total_chars, whole
from tinygpt.data.errors import DataError
from tinygpt.data.kinds.kind import CorpusKind, also_looked, text_rules
from tinygpt.data.root import DataRoot
from tinygpt.data.splits import SplitPlan, text_plan


class TextFile(CorpusKind):
    name = "file"
    whole_text = True

    def documents(self, location: Path, config: DataConfig, root: DataRoot) -> list[Document]:
        if location.is_dir():
            raise DataError(f"{location} (data.path={config.path}) is a directory; use data=textdir (data.corpus=dir)")
        if not location.is_file():
            raise DataError(f"corpus file {location} (data.path={config.path}) does not exist{also_looked(config)}")
        return scan_documents([(location.name, location)])

    def plan(self, corpus: Corpus, config: DataConfig) -> SplitPlan:
        documents = [whole(d) for d in corpus.documents]
        rest, test = split_pieces(documents, int(total_chars(documents) * (1 - config.test_fraction)))
        return text_plan(corpus, config, rest, test, ())

    def split_rules(self, config: DataConfig) -> str:
        test = f"test = last {config.test_fraction:.0%} of the characters" if config.test_fraction else "no test"
        return text_rules(config, test)
