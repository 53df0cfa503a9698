"""Corpus and tokenizer statistics with the default splits, printed and written into docs/data.md.

    tinygpt-data-stats                                                  # all corpora x all tokenizers, printed
    tinygpt-data-stats corpora=[timemachine] tokenizers=[char,gpt2]
    TINYGPT_DATA=../shared/data python scripts/data_stats.py write=true   # in a clone: into docs/data.md

Settings: conf/tools/data_stats.yaml. Each corpus x tokenizer is composed from conf/ as a run would compose it
(``data=<corpus> data/tokenizer=<name>``), through Hydra's compose API inside this Hydra app.

For each corpus: characters and bytes per split, and the held-out characters that never occur in the fit text.
For each corpus and tokenizer: vocabulary size, tokens per split, and the unigram entropy of the fit text.
This script reads the held-out split (to count it): it is a statistics tool, not part of a run.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import hydra
from hydra import compose
from omegaconf import DictConfig

from tinygpt.cli import CONF
from tinygpt.cli.config import register_configs
from tinygpt.cli.entry import entry, task
from tinygpt.data import CharTokenizer, TextDataModule
from tinygpt.data.documents import read_piece
from tinygpt.data.kinds import corpus_kind
from tinygpt.metrics import unigram_entropy_bits

register_configs()  # the typed schemas (tinygpt/cli/config.py), before Hydra composes

CORPORA = ("timemachine", "shakespeare", "peps")
TOKENIZERS = ("char", "bytes", "bpe", "gpt2")
BEGIN, END = "<!-- data_stats:begin -->", "<!-- data_stats:end -->"


def data_config(corpus: str, tokenizer: str):
    """The data config a run with ``data=<corpus> data/tokenizer=<tokenizer>`` composes (this app's conf/)."""
    return compose(config_name=None, overrides=[f"+data={corpus}", f"data/tokenizer={tokenizer}"]).data


def check_choices(field: str, chosen, allowed: tuple[str, ...]) -> list[str]:
    chosen = list(chosen)
    bad = [name for name in chosen if name not in allowed]
    if bad or not chosen:
        raise SystemExit(f"data_stats: {field}={chosen}: choose one or more of {list(allowed)}")
    return chosen


def held_out_text(dm: TextDataModule) -> str:
    return "".join(read_piece(piece) for piece in dm.prepared.plan.test)


def corpus_row(dm: TextDataModule) -> dict:
    """Tokenizer-independent facts: the splits in characters and bytes, and unseen held-out characters."""
    described = dm.describe()
    splits = described["splits"]
    fit_chars = CharTokenizer.fit([read_piece(p) for p in dm.prepared.plan.train])
    dev_text = "".join(read_piece(p) for p in dm.prepared.plan.dev)
    return {
        "corpus": described["corpus"]["name"],
        "documents": described["corpus"]["documents"],
        **{f"{s}_{unit}": splits[s][unit] for s in ("train", "dev", "test") for unit in ("chars", "bytes")},
        "distinct_fit_chars": fit_chars.vocab_size - 1,
        "unseen_dev": fit_chars.unseen_count(dev_text),
        "unseen_test": fit_chars.unseen_count(held_out_text(dm)),
        "held_out": described["held_out_documents"],
        "dev_documents": described["dev_documents"],
    }


def tokenizer_row(dm: TextDataModule) -> dict:
    test = dm.test_dataloader().dataset  # the explicit held-out read, for counting only
    train = dm.train_split
    bits_per_token = unigram_entropy_bits(train.ids)
    row = {
        "corpus": dm.config.name,
        "tokenizer": dm.tokenizer.name,
        "vocab": dm.vocab_size,
        "train": len(train),
        "dev": len(dm.dev_split),
        "test": len(test.ids),
        "entropy_token": bits_per_token,
        "entropy_char": bits_per_token * len(train) / train.chars,
        "whole": None,
    }
    row["total"] = row["train"] + row["dev"] + row["test"]
    if corpus_kind(
        dm.config.corpus
    ).whole_text:  # the whole file in one encoding (000 counts the Time Machine this way)
        row["whole"] = len(dm.tokenizer.encode(Path(dm.prepared.corpus.location).read_text(encoding="utf-8")))
    return row


def corpus_table(rows: list[dict]) -> list[str]:
    lines = [
        "| corpus | documents | train chars | train bytes | dev chars | dev bytes | test chars | test bytes "
        "| distinct fit chars | dev / test chars unseen in fit |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['corpus']} | {r['documents']:,} | {r['train_chars']:,} | {r['train_bytes']:,} | "
            f"{r['dev_chars']:,} | {r['dev_bytes']:,} | {r['test_chars']:,} | {r['test_bytes']:,} | "
            f"{r['distinct_fit_chars']} | {r['unseen_dev']:,} / {r['unseen_test']:,} |"
        )
    return lines


def tokenizer_table(rows: list[dict]) -> list[str]:
    lines = [
        "| corpus | tokenizer | vocabulary | train tokens | dev tokens | test tokens | total "
        "| whole text, one encoding | unigram entropy of fit text, bits/token | bits/char |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        whole = "-" if r["whole"] is None else f"{r['whole']:,}"
        lines.append(
            f"| {r['corpus']} | {r['tokenizer']} | {r['vocab']:,} | {r['train']:,} | {r['dev']:,} | "
            f"{r['test']:,} | {r['total']:,} | {whole} | {r['entropy_token']:.3f} | "
            f"{r['entropy_char']:.3f} |"
        )
    return lines


def report(corpus_rows: list[dict], token_rows: list[dict], context_length: int) -> str:
    lines = [
        f"Generated by `python scripts/data_stats.py write=true` (default splits of each `conf/data/<corpus>.yaml`, "
        f"context {context_length}).",
        "",
        "Splits in characters and bytes (the same for every tokenizer: the cuts are at character "
        'positions). "Unseen" counts held-out characters that never occur in the fit text: the `char` '
        "tokenizer maps each to id 0; the byte-level tokenizers (bytes, bpe, gpt2) have no unknowns.",
        "",
        *corpus_table(corpus_rows),
        "",
    ]
    for r in corpus_rows:
        if r["held_out"]:
            lines.append(
                f"- {r['corpus']}: held-out documents {', '.join(r['held_out'])}; "
                f"dev documents {', '.join(r['dev_documents']) or '(dev is a tail slice)'}"
            )
    lines += [
        "",
        "Tokens per split. The unigram entropy is that of the train (fit) text's token frequencies: bits "
        "per token, and the same spread over the fit text's characters (bits/char; equal for `char`).",
        "",
        *tokenizer_table(token_rows),
    ]
    return "\n".join(lines) + "\n"


def write_into_doc(block: str, doc: Path) -> None:
    text = doc.read_text(encoding="utf-8") if doc.exists() else f"# Data\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text += f"\n## Corpus statistics\n\n{BEGIN}\n{END}\n"
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(pattern.sub(lambda _: f"{BEGIN}\n{block}{END}", text), encoding="utf-8")


@entry(("doc",))
@hydra.main(config_path=CONF, config_name="tools/data_stats", version_base="1.3")
@task
def main(cfg: DictConfig) -> None:
    corpora = check_choices("corpora", cfg.corpora, CORPORA)
    tokenizers = check_choices("tokenizers", cfg.tokenizers, TOKENIZERS)
    corpus_rows, token_rows = [], []
    for corpus in corpora:
        for index, tokenizer in enumerate(tokenizers):
            started = time.perf_counter()
            dm = TextDataModule(data_config(corpus, tokenizer), context_length=cfg.context_length, seed=0)
            dm.setup()
            if index == 0:
                corpus_rows.append(corpus_row(dm))
            token_rows.append(tokenizer_row(dm))
            print(f"[data_stats] {corpus} / {tokenizer}: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    block = report(corpus_rows, token_rows, cfg.context_length)
    print(block)
    if cfg.write:
        write_into_doc(block, Path(cfg.doc))
        print(f"[data_stats] wrote {cfg.doc}", file=sys.stderr)


if __name__ == "__main__":
    main()
