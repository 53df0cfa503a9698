"""Finding, checking and loading checkpoints. Every load uses ``weights_only=True``."""

from __future__ import annotations

from dataclasses import MISSING, asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from tinygpt.common.errors import ConfigError
from tinygpt.common.files import atomic_write
from tinygpt.common.imports import import_modules
from tinygpt.common.run_folder import checkpoints_dir, last_checkpoint

if TYPE_CHECKING:
    from tinygpt.train.module import GPTModule
    from tinygpt.train.schema import RunConfig


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
        with atomic_write(path, "wb") as file:  # temp file + fsync + rename (tinygpt/common/files.py)
            torch.save(checkpoint, file)


def checkpoint_in(path: str | Path) -> Path:
    """A checkpoint's path, where a run folder stands for the checkpoint it ended on (``checkpoints/last.ckpt``):
    the folder is what a finished run prints and what a user has at hand."""
    path = Path(path)
    last = path / "checkpoints" / "last.ckpt"
    return last if path.is_dir() and last.is_file() else path


def read_checkpoint(path: str | Path) -> dict:
    path = checkpoint_in(path)
    if path.is_dir():
        raise CheckpointError(f"{path} is a folder with no checkpoints/last.ckpt: give a checkpoint or a run folder")
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for truncated/corrupt zip archives
        with open(path, "rb") as file:
            head = file.read(4)
        if not head.startswith((b"PK\x03\x04", b"\x80")):  # torch.save's zip archive, or its older plain pickle
            raise CheckpointError(f"{path} is not a tinygpt checkpoint (not a file torch.save wrote)") from None
        if "Weights only load failed" in str(err):
            # torch's own message goes on to advise weights_only=False, which would run the file's code: not here
            raise CheckpointError(
                f"{path} is not a tinygpt checkpoint: torch's weights-only loader refused what it holds (a tinygpt "
                "checkpoint holds tensors and plain values only), and loading it otherwise could run code from the file"
            ) from None
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"checkpoint {path} is unreadable (truncated or corrupt?): {first_line}") from None


def resume_point(run_dir: Path, run: RunConfig, module: GPTModule) -> tuple[str | None, int]:
    """Where the run continues: (the checkpoint, its step), or (None, 0) for a fresh start. The checkpoint is an
    explicit ``ckpt_path``, else with ``resume=auto`` the job's own ``checkpoints/last.ckpt`` if there is one; it
    is read, and checked to fit the built ``module`` and the run's optimizer and steps (``check_resumable``),
    before the Trainer touches anything. ``resume=never`` refuses a folder that already holds checkpoints."""
    if run.resume not in ("auto", "never"):
        raise ConfigError(f"resume={run.resume!r} is not allowed; choose auto or never")
    if run.ckpt_path:
        path = Path(run.ckpt_path)
    elif run.resume == "auto" and last_checkpoint(run_dir).exists():
        path = last_checkpoint(run_dir)
    elif run.resume == "never" and checkpoints_dir(run_dir).exists():
        raise ConfigError(
            f"resume=never: {checkpoints_dir(run_dir)} already holds checkpoints; pick another output folder "
            "(hydra.run.dir=...) rather than overwrite them, or resume=auto to continue"
        )
    else:
        return None, 0
    checkpoint = read_checkpoint(path)
    check_resumable(checkpoint, path, module.model_config, run.optim, run.trainer["max_steps"], module.tokenizer_json)
    return str(path), int(checkpoint.get("global_step", 0))


DECAYING = ("cosine", "linear", "wsd")  # schedules whose shape depends on trainer.max_steps


def check_resumable(checkpoint: dict, path, model, optim, max_steps: int, tokenizer_json: str | None) -> None:
    """Refuse, in one line, a checkpoint that does not fit the run it would resume: another model (shapes,
    vocabulary), another tokenizer, other optimizer settings (Lightning restores the checkpoint's optimizer and
    schedule, so they would be silently ignored), or another ``max_steps`` under a decaying schedule (the
    schedule would be reshaped mid-run: the learning rate jumps at the seam). Called before anything in the
    run folder is written. model, optim: the run's typed configs (GPTConfig or LSTMConfig, OptimConfig) or dicts of
    their fields, compared field by field with the checkpoint's plain dicts of them."""
    from tinygpt.model import config_from

    # a field a checkpoint predates (model.parametrization, added later) holds its default there
    model_defaults = {f.name: f.default for f in fields(config_from(model)) if f.default is not MISSING}
    model, optim = (value if isinstance(value, dict) else asdict(value) for value in (model, optim))
    hparams = checkpoint.get("hyper_parameters")
    if not isinstance(hparams, dict) or not isinstance(hparams.get("model"), dict):
        raise CheckpointError(f"checkpoint {path} is not a tinygpt training checkpoint (no hyper_parameters.model)")

    def differences(prefix: str, theirs: dict, ours: dict, defaults: dict | None = None) -> str:
        theirs = {**{k: v for k, v in (defaults or {}).items() if k in ours}, **theirs}
        keys = [k for k in sorted(set(theirs) | set(ours)) if theirs.get(k) != ours.get(k)]
        return ", ".join(f"{prefix}.{k}={theirs.get(k)!r} there, {ours.get(k)!r} here" for k in keys)

    changed = differences("model", hparams["model"], model, model_defaults)
    if changed:
        raise CheckpointError(
            f"checkpoint {path} holds another model ({changed}); resume it with its own "
            "settings, or use another run folder"
        )
    theirs_tokenizer = checkpoint.get("tokenizer")
    if tokenizer_json is not None and theirs_tokenizer is not None and theirs_tokenizer != tokenizer_json:
        raise CheckpointError(
            f"checkpoint {path} was trained with another tokenizer than this run's data.tokenizer; "
            "resume it with its own data settings, or use another run folder"
        )
    # checkpoints from before optim.decay_on existed decayed the matrices only
    changed = differences(
        "optim", {"decay_on": "matrices", **(hparams.get("optim") or {})}, {"decay_on": "matrices", **optim}
    )
    if changed:
        raise CheckpointError(
            f"checkpoint {path} was trained with other optimizer settings ({changed}); the "
            "checkpoint's optimizer and schedule state would override them: keep its settings, "
            "or start a new run"
        )
    old_steps = hparams.get("max_steps")
    if optim.get("schedule") in DECAYING and old_steps != max_steps:
        raise CheckpointError(
            f"checkpoint {path} was trained for trainer.max_steps={old_steps} under optim.schedule="
            f"{optim['schedule']}; continuing to {max_steps} would reshape the schedule mid-run. Keep "
            f"trainer.max_steps={old_steps}, or train a new run with the longer schedule from the start"
        )


def load_model(path: str | Path):
    """(GPT in eval mode, tokenizer, raw checkpoint) from any tinygpt checkpoint."""
    from tinygpt.data import tokenizer_from_json
    from tinygpt.model import build_model

    checkpoint = read_checkpoint(path)
    try:
        import_modules(checkpoint.get("hyper_parameters", {}).get("custom_imports"))  # the run's own parts
    except ImportError as err:
        raise CheckpointError(f"checkpoint {path}: {err}") from None
    try:
        config = checkpoint["hyper_parameters"]["model"]
        state = {k.removeprefix("model."): v for k, v in checkpoint["state_dict"].items() if k.startswith("model.")}
        tokenizer = tokenizer_from_json(checkpoint["tokenizer"])
    except KeyError as missing:
        raise CheckpointError(f"checkpoint {path} is not a tinygpt checkpoint (no {missing})") from None
    model = build_model(config)  # GPT or LSTM, by the config's family (tinygpt/model/families.py)
    model.load_state_dict(state)
    model.eval()
    return model, tokenizer, checkpoint
