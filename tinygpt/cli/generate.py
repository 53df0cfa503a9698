"""Sample from a checkpoint with the KV cache.

    tinygpt-generate outputs/runs/default/default/checkpoints/last.ckpt prompt="The Time Traveller" \
        max_new_tokens=300 temperature=0.8 top_k=50 seed=0
    tinygpt-generate outputs/runs/default/default beams=4               # beam search
    tinygpt-generate ckpt=outputs/runs/default/default/checkpoints/last.ckpt greedy=true

A checkpoint (or a run folder, for the checkpoint it ended on) can be given bare or as ckpt=, unquoted
(tinygpt/cli/entry.py quotes what Hydra would misread).
"""

import hydra
import torch
from omegaconf import DictConfig

from tinygpt.cli import CONF
from tinygpt.cli.config import register_configs
from tinygpt.cli.entry import checkpoint_file, entry, task
from tinygpt.common.say import say
from tinygpt.model import generate
from tinygpt.train.checkpoints import load_model

register_configs()  # the typed schemas (tinygpt/cli/config.py), before Hydra composes


DEFAULT_NEW_TOKENS = 200


def new_tokens(asked: int | None, prompt_tokens: int, context_length: int) -> int:
    """How many tokens to generate: as asked (generate refuses more than the context holds, in one line); by
    default 200, capped to the room the prompt leaves, as the sample at the end of training is."""
    if asked is not None:
        return asked
    room = max(context_length - prompt_tokens, 0)
    if room < DEFAULT_NEW_TOKENS:
        say(f"max_new_tokens={room}: the room a {prompt_tokens}-token prompt leaves in context_length={context_length}")
    return min(DEFAULT_NEW_TOKENS, room)


@entry(("ckpt",), bare=checkpoint_file)
@hydra.main(config_path=CONF, config_name="tools/generate", version_base="1.3")
@task
def main(cfg: DictConfig) -> None:
    model, tokenizer, _ = load_model(cfg.ckpt)
    ids = tokenizer.encode(cfg.prompt) or [0]
    generator = torch.Generator().manual_seed(cfg.seed)
    out = generate(
        model,
        torch.tensor([ids]),
        new_tokens(cfg.max_new_tokens, len(ids), model.config.context_length),
        temperature=cfg.temperature,
        top_k=cfg.top_k,
        top_p=cfg.top_p,
        greedy=cfg.greedy,
        generator=generator,
        beams=cfg.beams,
    )
    print(tokenizer.decode(out[0].tolist()))


if __name__ == "__main__":
    main()
