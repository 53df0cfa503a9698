"""Finding, checking and loading checkpoints. Every load uses ``weights_only=True``."""

from __future__ import annotations

from pathlib import Path

import torch

LAST = "last.ckpt"


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, truncated or corrupt; nothing has been written when this is raised."""


def read_checkpoint(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for truncated/corrupt zip archives
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"checkpoint {path} is unreadable (truncated or corrupt?): {first_line}") from None


def resume_path(run_dir: Path, resume: str, ckpt_path: str | None) -> str | None:
    """The checkpoint to resume from: an explicit ``ckpt_path``, else with ``resume=auto`` the job's own
    ``checkpoints/last.ckpt`` if there is one. Checked readable before the Trainer touches anything."""
    if resume not in ("auto", "never"):
        raise ValueError(f"resume={resume!r} is not allowed; choose auto or never")
    if ckpt_path:
        path = Path(ckpt_path)
    elif resume == "auto" and (run_dir / "checkpoints" / LAST).exists():
        path = run_dir / "checkpoints" / LAST
    else:
        return None
    read_checkpoint(path)
    return str(path)


def load_model(path: str | Path):
    """(GPT in eval mode, tokenizer, raw checkpoint) from any tinygpt checkpoint."""
    from tinygpt.data import tokenizer_from_json
    from tinygpt.model import GPT, GPTConfig

    checkpoint = read_checkpoint(path)
    try:
        config = GPTConfig(**checkpoint["hyper_parameters"]["model"])
        state = {k.removeprefix("model."): v for k, v in checkpoint["state_dict"].items()
                 if k.startswith("model.")}
        tokenizer = tokenizer_from_json(checkpoint["tokenizer"])
    except KeyError as missing:
        raise CheckpointError(f"checkpoint {path} is not a tinygpt checkpoint (no {missing})") from None
    model = GPT(config)
    model.load_state_dict(state)
    model.eval()
    return model, tokenizer, checkpoint
