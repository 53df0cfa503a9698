"""A tinygpt checkpoint -> a folder `transformers.AutoModelForCausalLM.from_pretrained` loads offline.

The folder holds config.json, model.safetensors and generation_config.json (written by the transformers model's
own save_pretrained, after a strict load of the converted weights, so a missing or misnamed tensor fails here and
not in a user's hands), the tokenizer (tinygpt/export/tokenizer.py) and README.md, the model card from the run's
record. Before anything is written, the family is chosen (or the export refused), and the transformers model's
logits are compared with tinygpt's on a fixed input; the folder is assembled beside `out` and renamed into
place, so a failed export leaves nothing half-written and an existing folder is never overwritten unless asked.
Exporting the same checkpoint twice gives byte-identical files.
"""

from __future__ import annotations

import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

from tinygpt.common.run_folder import read_record
from tinygpt.export.card import model_card
from tinygpt.export.families import ExportError, Family, choose_family, hf_config, to_hf_state
from tinygpt.export.tokenizer import hf_tokenizer, save_tokenizer, tokenizer_refusal
from tinygpt.model import GPT
from tinygpt.train.checkpoints import checkpoint_in, load_model

CHECK_TOKENS = 16  # length of the fixed input on which the two models' logits are compared before writing


@dataclass
class Exported:
    folder: Path
    family: Family
    max_logit_difference: float


def check_same_logits(model: GPT, hf_model, what: str) -> float:
    """Max |tinygpt logits - transformers logits| on a fixed input; ExportError if they are not the same model."""
    n = min(CHECK_TOKENS, model.config.context_length)
    ids = torch.randint(0, model.config.vocab_size, (1, n), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours = model.eval()(ids).logits.float()
        theirs = hf_model.eval()(input_ids=ids).logits.float()
    difference = float((ours - theirs).abs().max())
    if difference > 1e-4 * max(1.0, float(ours.abs().max())):
        raise ExportError(
            f"{what}: transformers' logits differ from tinygpt's by {difference:.3g}; nothing was "
            "written (please report this as a tinygpt bug)"
        )
    return difference


def build_hf_model(model: GPT, family: Family):
    """The transformers model holding exactly `model`'s weights (strict load: every tensor accounted for)."""
    from transformers import AutoModelForCausalLM, GenerationConfig

    config = hf_config(model.config, family, bos_id=None, eos_id=None)
    hf_model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    hf_model.load_state_dict(to_hf_state(model.state_dict(), model.config, family), strict=True)
    # tinygpt has no special tokens: generation stops at max_new_tokens, as scripts/generate.py does
    hf_model.generation_config = GenerationConfig(bos_token_id=None, eos_token_id=None, pad_token_id=None)
    return hf_model


def _check_out(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ExportError(f"out={out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise ExportError(
            f"out={out} already exists and is not empty: choose a new folder, or overwrite=true to replace it"
        )


def export_refusal(ckpt: str | Path) -> str | None:
    """Why ``tinygpt-export`` would refuse this checkpoint (a switch no transformers class expresses, a tokenizer
    it cannot write, transformers not installed), or None when it would export: what a finished run's printed next
    commands consult, so that they name only commands that work for that run."""
    model, tokenizer, _ = load_model(ckpt)
    try:
        choose_family(model.config)
    except ExportError as refused:
        return str(refused)
    refused = tokenizer_refusal(tokenizer)
    if refused is None and importlib.util.find_spec("transformers") is None:
        return "tinygpt-export needs transformers: pip install 'tinygpt[hf]'"
    return refused


def export_checkpoint(ckpt: str | Path, out: str | Path, family: str = "auto", overwrite: bool = False) -> Exported:
    ckpt, out = checkpoint_in(ckpt), Path(out)
    model, tokenizer, checkpoint = load_model(ckpt)
    chosen = choose_family(model.config, family)
    _check_out(out, overwrite)
    if tokenizer.vocab_size > model.config.vocab_size:
        raise ExportError(
            f"checkpoint {ckpt}: its tokenizer has {tokenizer.vocab_size} ids but the model only "
            f"{model.config.vocab_size}"
        )
    hf_tokenizer(tokenizer, model.config.context_length)  # refuses a tokenizer it cannot express, before writing
    hf_model = build_hf_model(model, chosen)
    difference = check_same_logits(model, hf_model, f"export of {ckpt}")

    run_dir = ckpt.resolve().parent.parent  # <run>/checkpoints/<file>, as evaluate.py reads it
    card = model_card(
        model.config,
        chosen,
        ckpt,
        checkpoint.get("global_step"),
        model.num_parameters(),
        tokenizer,
        read_record(run_dir),
        run_dir,
    )
    staging = out.with_name(f".{out.name}.export-tmp")  # written whole, then renamed to out
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
    except OSError as err:  # named as the user gave it: the staging folder beside it is ours, not theirs
        raise ExportError(f"out={out}: cannot write a folder there ({err.strerror or err})") from None
    try:
        hf_model.save_pretrained(staging)
        save_tokenizer(tokenizer, model.config.context_length, staging)
        (staging / "README.md").write_text(card, encoding="utf-8")
        if out.exists():
            old = out.with_name(f".{out.name}.export-old")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
            staging.rename(out)
            shutil.rmtree(old)
        else:
            staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Exported(out, chosen, difference)
