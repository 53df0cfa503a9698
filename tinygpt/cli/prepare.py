"""Prepare a corpus once: its train and dev splits encoded into a folder every later run maps (no re-encoding).

    tinygpt-prepare data=peps data/tokenizer=bpe
    tinygpt-prepare data=textdir data.path=my_code data.glob='**/*.py' data.dev=documents data.dev_fraction=0.01

Takes the same `data` settings as tinygpt-train: a run with them (any model, seed, batch size or context) maps the
folder this writes (tinygpt/data/prepared.py says what is in it and where it lives). A run prepares what it needs
by itself, so this is for doing it ahead: once, before a sweep whose jobs start at the same time, or on a machine
with more memory. Prints the folder and what it holds; a second call finds it and encodes nothing.
"""

import hydra
from omegaconf import DictConfig

from tinygpt.cli import CONF
from tinygpt.cli.config import register_configs
from tinygpt.cli.entry import entry, task
from tinygpt.common.say import say
from tinygpt.common.typed import typed
from tinygpt.data.config import DataConfig
from tinygpt.data.datamodule import prepare_corpus
from tinygpt.data.errors import DataError
from tinygpt.data.kinds import corpus_kind
from tinygpt.data.prepared import other_formats_note

register_configs()  # the typed schemas (tinygpt/cli/config.py), before Hydra composes


@entry(("data.path", "data.root"))
@hydra.main(config_path=CONF, config_name="tools/prepare", version_base="1.3")
@task
def main(cfg: DictConfig) -> None:
    config = typed(DataConfig, cfg.data, "data", DataError)
    _, corpus, _, splits = prepare_corpus(config)  # a user's mistake: one line (tinygpt/cli/entry.py)
    manifest = splits.manifest
    how = "encoded now" if splits.written else "already prepared: mapped, nothing encoded"
    say(f"prepared: {splits.folder} ({how})")
    kind = corpus_kind(corpus.kind)
    for line in kind.summary(corpus):  # what a records or shards corpus wrote into its store
        say(line)
    held = kind.held
    say(f"corpus: {corpus.location}, {len(corpus.documents):,} {held}, {corpus.bytes:,} bytes")
    tokenizer = splits.tokenizer
    say(f"tokenizer: {tokenizer.name}, vocabulary {tokenizer.vocab_size:,}; ids stored as {manifest['ids_dtype']}")
    train = manifest["train"]
    say(f"train: {train['tokens']:,} tokens from {train['bytes']:,} bytes, {len(train['documents']):,} document(s)")
    dev = manifest["dev"]
    say("dev: none" if dev is None else f"dev: {dev['tokens']:,} tokens from {dev['bytes']:,} bytes")
    say("held-out: not encoded (read only when scored: tinygpt-evaluate split=test)")
    note = other_formats_note(splits.folder.parent) if splits.written else None
    if note:
        say(note)


if __name__ == "__main__":
    main()
