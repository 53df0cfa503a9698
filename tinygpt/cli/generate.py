"""Sample from a checkpoint with the KV cache.

    python scripts/generate.py "ckpt='outputs/runs/default/default/checkpoints/last.ckpt'" \
        prompt="The Time Traveller" max_new_tokens=300 temperature=0.8 top_k=50 seed=0
    python scripts/generate.py ckpt=... greedy=true
"""

import hydra
import torch
from omegaconf import DictConfig

from tinygpt.cli import CONF
from tinygpt.cli.config import register_configs
from tinygpt.model import generate
from tinygpt.train.checkpoints import load_model

register_configs()  # the typed schemas (tinygpt/cli/config.py), before Hydra composes


@hydra.main(config_path=CONF, config_name="tools/generate", version_base="1.3")
def main(cfg: DictConfig) -> None:
    model, tokenizer, _ = load_model(cfg.ckpt)
    ids = tokenizer.encode(cfg.prompt) or [0]
    generator = torch.Generator().manual_seed(cfg.seed)
    out = generate(
        model,
        torch.tensor([ids]),
        cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_k=cfg.top_k,
        top_p=cfg.top_p,
        greedy=cfg.greedy,
        generator=generator,
    )
    print(tokenizer.decode(out[0].tolist()))


if __name__ == "__main__":
    main()
