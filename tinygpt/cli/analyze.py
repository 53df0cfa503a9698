"""003's analyses of a trained run, written into a report beside it (<run_dir>/analysis_<split>.md and .json):

    python scripts/baselines.py data=peps data.dev=tail                    # the baseline rows, first
    python scripts/analyze.py run_dir=outputs/runs/blog/default            # dev split
    python scripts/analyze.py run_dir=outputs/runs/blog/default split=test # held-out: scored once (below)

- the comparison table: every kept checkpoint and every baseline, per document, in all, and (the GPT) on a
  60,000-character sample of its training text; the characters never seen in training and what they cost;
- repeats: copied and repeated masks (spans 32 and 16, T = the model's context) and the model's cost on each;
- memorization: the longest stretch of seeded samples, of a greedy continuation and of held-out text found
  verbatim in the training text, and where. How to read them: docs/baselines.md.

split=test is a held-out scoring like evaluate.py's, under the same score-once rules (tinygpt/train/score_once.py):
checked against the run's ledger before anything is scored, only the pre-registered step(s) when the run has
some, and a second scoring only with force=true reason="...". To have both evaluate.py's line and this report
from one scoring, use this one.
"""

import hydra
from omegaconf import DictConfig

from tinygpt.analysis.run import analyze
from tinygpt.cli import CONF
from tinygpt.cli.config import register_configs
from tinygpt.cli.entry import entry, one_line, run_folder, task

register_configs()  # the typed schemas (tinygpt/cli/config.py), before Hydra composes


@entry(("run_dir", "baselines"), bare=run_folder)
@hydra.main(config_path=CONF, config_name="tools/analyze", version_base="1.3")
@task
def main(cfg: DictConfig) -> None:
    with one_line("refused"):
        analyze(
            cfg.run_dir,
            split=cfg.split,
            baselines=cfg.baselines,
            samples=cfg.samples,
            seed=cfg.seed,
            temperature=cfg.temperature,
            prompt=cfg.prompt,
            greedy_prompt=cfg.greedy_prompt,
            sample_chars=cfg.sample_chars,
            spans=tuple(cfg.spans),
            device=cfg.device,
            force=cfg.force,
            reason=cfg.reason,
        )


if __name__ == "__main__":
    main()
