"""Score checkpoints in bits per byte on the dev split or, only when asked, on the held-out test split.

    python scripts/evaluate.py run_dir=outputs/runs/blog/default                 # dev, every checkpoint
    python scripts/evaluate.py run_dir=... split=test                            # the held-out text
    python scripts/evaluate.py outputs/.../checkpoints/step004000.ckpt split=test   # a bare path: ckpt=

The data splits are rebuilt from the run's own record (same corpus, seed, split settings, tokenizer from
the checkpoint). Every test scoring is appended, with its time, to <run_dir>/evaluations.jsonl and listed in
run.json. Score once: a checkpoint already scored on the test split (the same step or the same weights), or one
at a step the run did not pre-register (score_once.steps), is refused before anything is written, unless
    python scripts/evaluate.py run_dir=... split=test force=true reason="why this second look"
which records the scoring as forced, with its reason, beside the first (tinygpt/train/score_once.py).

A whole sweep, once, in one call (no job folder to quote):
    python scripts/evaluate.py sweep_dir=outputs/sweeps/blog_final split=test
scores every finished job at its pre-registered step(s) through the same ledger, skips and lists the jobs already
scored, refuses (and lists) jobs not finished or not pre-registered, then writes the sweep's report with the
held-out table and its paired statistics (tinygpt/report/score_sweep.py). Exit status 1 when a job was refused.
"""

import sys

import hydra
from omegaconf import DictConfig

from tinygpt.cli import CONF
from tinygpt.cli.config import register_configs
from tinygpt.cli.entry import entry, one_line, run_folder_or_checkpoint, task
from tinygpt.cli.report import experiment_defaults
from tinygpt.common.errors import ConfigError
from tinygpt.report.report import write_report
from tinygpt.report.score_sweep import plan_sweep, score_planned
from tinygpt.train.evaluate import evaluate

register_configs()  # the typed schemas (tinygpt/cli/config.py), before Hydra composes


# conf/ is the search path (not conf/tools/), so that sweep_dir= can compose conf/train.yaml for its report
@entry(("run_dir", "ckpt", "sweep_dir"), bare=run_folder_or_checkpoint)
@hydra.main(config_path=CONF, config_name="tools/evaluate", version_base="1.3")
@task
def main(cfg: DictConfig) -> None:
    if cfg.sweep_dir:
        sys.exit(evaluate_sweep(cfg))
    with one_line("refused"):
        rows = evaluate(
            cfg.run_dir, ckpt=cfg.ckpt, split=cfg.split, device=cfg.device, force=cfg.force, reason=cfg.reason
        )
    for row in rows:
        print(
            f"{row['checkpoint']}: step {row['step']}  {row['split']} bits per byte {row['bits_per_byte']:.4f}"
            f"  (bits/token {row['bits_per_token']:.4f}, bits/char {row['bits_per_char']:.4f})"
        )
        for name, bpb in row.get("per_document_bpb", {}).items():
            print(f"    {name}: {bpb:.4f} bits per byte")


def evaluate_sweep(cfg: DictConfig) -> int:
    with one_line("refused"):
        if cfg.split != "test":
            raise ConfigError(
                f"sweep_dir= with split={cfg.split}: a sweep is scored on the held-out split (split=test); its dev "
                "scores are in each run's record already (tinygpt-report)"
            )
        if cfg.run_dir or cfg.ckpt or cfg.force or cfg.reason:
            raise ConfigError(
                "sweep_dir= scores each job once at its pre-registered step: give it without run_dir=, ckpt=, force= "
                "or reason= (a forced second look is one run's: evaluate run_dir=... force=true reason=...)"
            )
        jobs, plan = plan_sweep(cfg.sweep_dir)
    print(
        f"[tinygpt] sweep {cfg.sweep_dir}: {len(jobs)} jobs; {len(plan.to_score)} to score, "
        f"{len(plan.already)} already scored, {len(plan.refused)} refused"
    )
    for job, when in plan.already:
        print(f"[tinygpt] already scored, skipped (score once): {job.name}: {when}")
    for job, why in plan.refused:
        print(f"[tinygpt] refused: {job.name}: {why}")
    with one_line("refused"):
        score_planned(plan, device=cfg.device)
    report = write_report(cfg.sweep_dir, held_out=True, defaults=experiment_defaults)
    print(f"[tinygpt] the held-out table and its comparisons: {report.markdown}")
    return 1 if plan.refused else 0


if __name__ == "__main__":
    main()
