"""Score 003's baselines on a corpus, on the same scale, splits and scored positions as the GPT's bits per byte.

    python scripts/baselines.py data=peps data.dev=tail                  # dev split (the default)
    python scripts/baselines.py data=peps data.dev=tail lstm_run=outputs/runs/blog_lstm/default
    python scripts/baselines.py data=shakespeare split=test              # the held-out text, logged
    python scripts/baselines.py data=textfile data.path=/path/to/book.txt kn_order=4

Prints one line per baseline, `NAME: X.XXX bits per byte` (bz2, lzma, zlib, kneser-ney-6, unigram, lstm), and
writes <out_dir>/baselines_<split>.json for scripts/analyze.py. What each one means: docs/baselines.md.
With split=test the LSTM line is a held-out scoring of that run's checkpoint, under the score-once rules
(tinygpt/train/score_once.py): refused if its ledger lists it already, unless force=true reason="...".
"""

import hydra
from omegaconf import DictConfig

from tinygpt.baselines.run import run_baselines
from tinygpt.cli import CONF
from tinygpt.cli.config import register_configs
from tinygpt.cli.entry import entry, one_line, task

register_configs()  # the typed schemas (tinygpt/cli/config.py), before Hydra composes


@entry(("lstm_run", "out_dir", "data.path", "data.root"))
@hydra.main(config_path=CONF, config_name="tools/baselines", version_base="1.3")
@task
def main(cfg: DictConfig) -> None:
    with one_line("refused"):
        run_baselines(
            cfg.data,
            split=cfg.split,
            kn_order=cfg.kn_order,
            lstm_run=cfg.lstm_run,
            out_dir=cfg.out_dir,
            device=cfg.device,
            force=cfg.force,
            reason=cfg.reason,
        )


if __name__ == "__main__":
    main()
