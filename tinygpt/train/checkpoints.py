"""Finding, checking and loading checkpoints. Every load uses ``weights_only=True``."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

LAST = "last.ckpt"


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, truncated or corrupt; nothing has been written when this is raised."""


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint I/O, writing each file as temp file + fsync + rename in the same folder, so a
    crash mid-save leaves the previous checkpoint whole. (Lightning's own save stages through the system temp
    folder and ``shutil.move``, which is a plain copy when that folder is on another file system.) Local
    paths only; other URLs go to Lightning's implementation."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        if "://" in str(path):
            return super().save_checkpoint(checkpoint, path, storage_options)
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        try:
            with open(tmp, "wb") as file:
                torch.save(checkpoint, file)
                file.flush()
                os.fsync(file.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


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
    from tinygpt.model import build_model

    checkpoint = read_checkpoint(path)
    try:
        config = checkpoint["hyper_parameters"]["model"]
        state = {k.removeprefix("model."): v for k, v in checkpoint["state_dict"].items()
                 if k.startswith("model.")}
        tokenizer = tokenizer_from_json(checkpoint["tokenizer"])
    except KeyError as missing:
        raise CheckpointError(f"checkpoint {path} is not a tinygpt checkpoint (no {missing})") from None
    model = build_model(config)  # GPT or LSTM, by the config's family (tinygpt/model/families.py)
    model.load_state_dict(state)
    model.eval()
    return model, tokenizer, checkpoint
