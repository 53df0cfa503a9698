"""The calls of tinygpt's Python API, each the same code path as the command-line program that does the same job."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from omegaconf import DictConfig

from tinygpt.analysis.harness import encode_pair
from tinygpt.cli.config import compose_run_config
from tinygpt.common.errors import ConfigError, PathError
from tinygpt.common.run_folder import TRAIN_LOG
from tinygpt.common.say import log_file
from tinygpt.data import TextDataModule, build_datamodule
from tinygpt.data.encoded import encode_segments
from tinygpt.data.tokenizers import Tokenizer
from tinygpt.data.windows import SlidingWindowDataset
from tinygpt.export.export import export_refusal
from tinygpt.metrics import score
from tinygpt.model.generate import generate as generate_ids
from tinygpt.train import device_settings
from tinygpt.train import run as training
from tinygpt.train.checkpoints import load_model
from tinygpt.train.module import GPTModule, build_module
from tinygpt.train.preflight import check_run_config
from tinygpt.train.schema import parse_run_config


def compose(overrides: Sequence[str] = (), config_dir: str | Path | None = None) -> DictConfig:
    """The run config ``tinygpt-train <overrides>`` composes: conf/train.yaml with the same overrides
    (``["experiment=blog", "seed=1"]``), every value checked as ``tinygpt-train`` checks it, before anything is
    written (a ``ConfigError`` naming the field). ``config_dir``: a folder of one's own configs, searched as
    ``tinygpt-train --config-dir`` searches it (e.g. its ``experiment/<name>.yaml``)."""
    search_path = []
    if config_dir is not None:
        folder = Path(config_dir).expanduser().resolve()
        if not folder.is_dir():
            raise PathError(f"config_dir={config_dir}: no such folder")
        search_path.append(folder)
    cfg = compose_run_config(overrides, search_path=search_path)
    check_run_config(cfg)  # a name of the user's own registered first; every value and the pre-registration checked
    return cfg


def train(cfg: DictConfig, run_dir: str | Path) -> dict:
    """Train ``cfg`` into ``run_dir`` as ``tinygpt-train`` would (the same folder layout, run.json, checkpoints;
    rerun to resume a stopped run, a finished one is skipped; its lines, and Lightning's, also go to
    ``run_dir/train.log``). Returns the run record (run.json's content)."""
    run_dir = Path(run_dir)
    with log_file(run_dir / TRAIN_LOG):
        return training.train(cfg, run_dir, export_refusal=export_refusal)


def build(cfg: DictConfig) -> tuple[GPTModule, TextDataModule]:
    """The ``LightningModule`` and ``LightningDataModule`` that ``train`` would train, set up for fitting, for a
    ``lightning.Trainer`` of one's own (``trainer.fit(module, datamodule=datamodule)``)."""
    run, device = device_settings.prepare(parse_run_config(cfg))
    datamodule = build_datamodule(run.data, run.model.context_length, run.seed)
    return build_module(run, datamodule.tokenizer, device.speed), datamodule


def load(checkpoint: str | Path) -> tuple[torch.nn.Module, Tokenizer]:
    """The model (in eval mode) and tokenizer of any tinygpt checkpoint: last.ckpt, a kept stepNNNNNN.ckpt, an
    imported one. Loaded with ``weights_only=True``; the tokenizer travels inside the checkpoint."""
    model, tokenizer, _ = load_model(checkpoint)
    return model, tokenizer


def generate(
    model: torch.nn.Module,
    tokenizer: Tokenizer,
    prompt: str,
    max_new_tokens: int = 100,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    beams: int | None = None,
) -> str:
    """The prompt and its continuation, as text (KV cache; ``seed`` makes the sampling repeatable; ``beams=k``
    searches k beams for the likeliest continuation instead of sampling)."""
    ids = torch.tensor([tokenizer.encode(prompt)], dtype=torch.long)
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed) if seed is not None else None
    out = generate_ids(
        model,
        ids.to(device),
        max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        generator=generator,
        beams=beams,
    )
    return tokenizer.decode(out[0].tolist())


def score_text(model: torch.nn.Module, tokenizer: Tokenizer, text: str, batch_size: int = 32) -> dict:
    """Bits per byte of ``text`` under the model, scored as a dev split is (sliding windows, every token but the
    first scored once, the bits divided by the UTF-8 bytes of the scored text); also bits per token and per
    character, the loss and the counts."""
    encoded = encode_segments(tokenizer, [("text", text)])
    if len(encoded.ids) < 2:
        raise ConfigError(f"score_text: the text has {len(encoded.ids)} token(s); at least 2 are needed to score one")
    context = min(model.config.context_length, len(encoded.ids) - 1)  # a short text: one window of it all
    windows = SlidingWindowDataset(encoded.ids, encoded.token_bytes, encoded.token_chars, context, encoded.token_doc)
    loader = torch.utils.data.DataLoader(windows, batch_size=batch_size)
    return score(model, loader, next(model.parameters()).device)


def score_continuation(model: torch.nn.Module, tokenizer: Tokenizer, context: str, continuation: str) -> float:
    """The log-probability (natural log, summed over its tokens) of ``continuation`` after ``context``: what a
    multiple-choice benchmark compares between choices. The text is split as lm-evaluation-harness splits it (the
    context's trailing spaces go with the continuation) and cut on the left to the model's context."""
    head, tail = encode_pair(tokenizer, context, continuation)
    if not head or not tail:
        raise ConfigError("score_continuation: the context and the continuation must each hold at least one token")
    text = (head + tail)[-(model.config.context_length + 1) :]
    device = next(model.parameters()).device
    with torch.no_grad():
        logits = model(torch.tensor([text[:-1]], device=device)).logits[0].float()
    log_probs = logits.log_softmax(-1)[-len(tail) :]
    return float(log_probs.gather(-1, torch.tensor(tail, device=device)[:, None]).double().sum())
