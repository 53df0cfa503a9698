"""Score checkpoints in bits per byte on the dev split or, only when asked, on the held-out test split.

    python scripts/evaluate.py run_dir=outputs/runs/blog/default                 # dev, every checkpoint
    python scripts/evaluate.py run_dir=... split=test                            # the held-out text
    python scripts/evaluate.py "ckpt='outputs/.../checkpoints/step004000.ckpt'" split=test

The data splits are rebuilt from the run's own record (same corpus, seed, split settings, tokenizer from
the checkpoint). Every test scoring is appended, with its time, to <run_dir>/evaluations.jsonl and listed in
run.json. Score once: a checkpoint already scored on the test split (the same step or the same weights), or one
at a step the run did not pre-register (score_once.steps), is refused before anything is written, unless
    python scripts/evaluate.py run_dir=... split=test force=true reason="why this second look"
which records the scoring as forced, with its reason, beside the first (tinygpt/train/score_once.py).
"""

import hydra
from omegaconf import DictConfig

from tinygpt.cli import TOOLS_CONF
from tinygpt.cli.config import register_configs
from tinygpt.cli.refusals import refused_in_one_line
from tinygpt.train.evaluate import evaluate

register_configs()  # the typed schemas (tinygpt/cli/config.py), before Hydra composes


@hydra.main(config_path=TOOLS_CONF, config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    with refused_in_one_line():
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


if __name__ == "__main__":
    main()
