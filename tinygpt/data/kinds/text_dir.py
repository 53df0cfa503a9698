"""A folder of texts: the files ``data.glob`` matches, each one document, in sorted name order; whole documents are
held out (listed, a seeded choice, or a seeded hash of their names)."""

from __future__ import annotations

from pathlib import Path

from tinygpt.data.config import DataConfig
from tinygpt.data.documents import Corpus, Document, scan_documents, whole
from tinygpt.data.errors import DataError
from tinygpt.data.kinds.kind import CorpusKind, also_looked, text_rules
from tinygpt.data.root import DataRoot
from tinygpt.data.splits import SplitPlan, hashed, held_out_documents, text_plan


class TextDir(CorpusKind):
    name = "dir"

    def documents(self, location: Path, config: DataConfig, root: DataRoot) -> list[Document]:
        if not location.is_dir():
            raise DataError(
                f"corpus directory {location} (data.path={config.path}) does not exist or is not a directory"
                + also_looked(config)
            )
        matches = (p for p in location.glob(config.glob) if p.is_file())
        # sorted by name, so the text and every seeded choice are the same whatever order the file system lists
        paths = sorted(matches, key=lambda p: p.relative_to(location).as_posix())
        if not paths:
            present = sorted(p.name for p in location.iterdir())[:8]
            raise DataError(
                f"data.glob={config.glob!r} matches no files in {location} (data.path={config.path}); "
                f"it holds e.g. {present}"
            )
        return scan_documents([(p.relative_to(location).as_posix(), p) for p in paths])

    def plan(self, corpus: Corpus, config: DataConfig) -> SplitPlan:
        documents = [whole(d) for d in corpus.documents]
        chosen = hashed(corpus, config, "test") if config.split_by == "hash" else held_out_documents(corpus, config)
        rest = [p for p in documents if p.document not in chosen]
        test = [p for p in documents if p.document in chosen]
        return text_plan(corpus, config, rest, test, chosen)

    def dev_advice(self, config: DataConfig) -> str | None:
        if config.dev != "tail":
            return None
        return "keep whole documents for dev instead: data.dev=documents " + (
            "data.dev_fraction=<share>" if config.split_by == "hash" else "data.dev_k=<how many>"
        )

    def split_rules(self, config: DataConfig) -> str:
        if config.split_by == "hash":
            hashed_by = f"a hash of their names (split_seed={config.split_seed})"
            test = f"test = the {config.test_fraction:.0%} of the documents {hashed_by} holds out"
        elif config.test_documents:
            test = f"test = the listed documents {list(config.test_documents)}"
        else:
            test = f"test = {config.test_k} whole documents chosen with split_seed={config.split_seed}"
        return text_rules(config, test)
