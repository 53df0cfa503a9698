"""EleutherAI's lm-evaluation-harness on a checkpoint: tinygpt-lm-eval <checkpoint or run folder> tasks=...

    tinygpt-lm-eval outputs/runs/default/default tasks=hellaswag limit=500
    tinygpt-lm-eval outputs/runs/default/default tasks=my_task include_path=my_tasks/ batch_size=32

The model runs in the harness as its native ``tinygpt`` model class (tinygpt/analysis/harness.py), and each task's
results are written to ``<run>/lm_eval/<task>.json``, which ``tinygpt-report`` shows as a column per task.
Needs the optional extra: pip install 'tinygpt[lm-eval]'. What the scores mean at this scale: docs/evaluation.md.
"""

import hydra
from omegaconf import DictConfig

from tinygpt.cli import CONF
from tinygpt.cli.config import register_configs
from tinygpt.cli.entry import checkpoint_file, entry, task

register_configs()  # the typed schemas (tinygpt/cli/config.py), before Hydra composes


@entry(("ckpt", "include_path", "tasks"), bare=checkpoint_file)
@hydra.main(config_path=CONF, config_name="tools/lm_eval", version_base="1.3")
@task
def main(cfg: DictConfig) -> None:
    from tinygpt.analysis.harness import run_tasks

    tasks = [name.strip() for name in str(cfg.tasks).split(",") if name.strip()]
    output = run_tasks(
        cfg.ckpt,
        tasks,
        limit=cfg.limit,
        batch_size=cfg.batch_size,
        include_path=cfg.include_path,
        num_fewshot=cfg.num_fewshot,
        device=cfg.device,
    )
    for name, results in output["results"].items():
        scores = ", ".join(
            f"{key.split(',')[0]} {value:.4f}"
            for key, value in results.items()
            if isinstance(value, int | float) and "stderr" not in key
        )
        print(f"[tinygpt] {name}: {scores}")
    print(f"[tinygpt] written: {output['run_dir']}/lm_eval/<task>.json")


if __name__ == "__main__":
    main()
