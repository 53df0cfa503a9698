"""Export a checkpoint to Hugging Face transformers:  tinygpt-export <checkpoint or run folder> out=<folder>

    tinygpt-export outputs/runs/default/default/checkpoints/last.ckpt out=outputs/hf/blog
    tinygpt-export ckpt=... out=... family=qwen3      # insist on a family (auto picks the one that fits)

Writes config.json, model.safetensors, generation_config.json, tokenizer.json (+ tokenizer_config.json and
tinygpt_tokenizer.json) and a README.md model card from the run's run.json. A model no transformers class
expresses exactly is refused, with the switch in the way, before anything is written (tinygpt/export/).
"""

import hydra
from omegaconf import DictConfig

from tinygpt.cli import CONF
from tinygpt.cli.config import register_configs
from tinygpt.cli.entry import checkpoint_file, entry, task
from tinygpt.export.export import export_checkpoint

register_configs()  # the typed schemas (tinygpt/cli/config.py), before Hydra composes


@entry(("ckpt", "out"), bare=checkpoint_file)
@hydra.main(config_path=CONF, config_name="tools/export", version_base="1.3")
@task
def main(cfg: DictConfig) -> None:
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # its per-shard bars; our one-line summary says what was done
    done = export_checkpoint(cfg.ckpt, cfg.out, family=cfg.family, overwrite=cfg.overwrite)  # refusals: @task
    print(
        f"[tinygpt] exported {cfg.ckpt} as {done.family.hf_class} to {done.folder} (logits checked: max "
        f"difference {done.max_logit_difference:.2g})"
    )
    print(f"[tinygpt] load it with transformers.AutoModelForCausalLM.from_pretrained({str(done.folder)!r})")


if __name__ == "__main__":
    main()
