"""Import a local transformers folder:  python scripts/import_hf.py hf=<folder> out=<run folder> [data overrides]

    python scripts/import_hf.py hf=outputs/hf/blog out=outputs/imported/blog
    python scripts/import_hf.py hf=/models/gpt2 out=outputs/imported/gpt2 data/tokenizer=gpt2 data.split_unit=tokens
    python scripts/evaluate.py run_dir=outputs/imported/gpt2         # then score it, or sample from it:
    tinygpt-generate outputs/imported/gpt2/checkpoints/imported.ckpt greedy=true

Supported: LlamaForCausalLM, Qwen3ForCausalLM and GPT2LMHeadModel folders whose every setting tinygpt computes
the same way (tinygpt/export/families.py); anything else is refused, naming the config.json field. Nothing is
downloaded. The data group chooses what evaluate.py scores the model on.
"""

import hydra
from omegaconf import DictConfig

from tinygpt.cli import CONF
from tinygpt.cli.config import register_configs
from tinygpt.cli.entry import entry, task
from tinygpt.common.run_folder import config_record, record_path
from tinygpt.export.import_hf import import_folder

register_configs()  # the typed schemas (tinygpt/cli/config.py), before Hydra composes


@entry(("hf", "out", "data.path", "data.root"))
@hydra.main(config_path=CONF, config_name="tools/import_hf", version_base="1.3")
@task
def main(cfg: DictConfig) -> None:
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # its per-shard bars; our one-line summary says what was done
    run_config = {"name": cfg.name, "seed": cfg.seed, "data": config_record(cfg.data)}
    ckpt = import_folder(cfg.hf, cfg.out, run_config, overwrite=cfg.overwrite)  # a refusal: one line (@task)
    print(f"[tinygpt] imported {cfg.hf} to {ckpt} (run record: {record_path(ckpt.parent.parent)})")


if __name__ == "__main__":
    main()
