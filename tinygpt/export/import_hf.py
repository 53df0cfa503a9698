"""A local `transformers` folder of a supported family -> a tinygpt run folder that evaluate.py and generate.py use.

The run folder gets checkpoints/imported.ckpt (a weights-only tinygpt checkpoint: model switches, weights,
tokenizer) and run.json (the data settings to score it on, and where it came from). The folder is read with
transformers' own loaders (config, sharded or single safetensors, tied heads), offline: nothing is downloaded.
config.json is checked switch by switch before any weight is read, and the converted model's logits are
compared with transformers' before anything is written. tinygpt -> transformers -> tinygpt gives back the
same weights, bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import torch

from tinygpt.common.files import atomic_write
from tinygpt.common.run_folder import IMPORTED_CHECKPOINT, checkpoints_dir, record_path, write_record
from tinygpt.export.export import check_same_logits
from tinygpt.export.families import FAMILIES, ExportError, from_hf_state, tinygpt_config
from tinygpt.export.tokenizer import read_tokenizer
from tinygpt.model import GPT


def import_folder(hf_dir: str | Path, out: str | Path, run_config: dict, overwrite: bool = False) -> Path:
    """Write <out>/checkpoints/imported.ckpt and <out>/run.json; returns the checkpoint's path.

    run_config: what run.json records as the run's config (name, seed, data), so that evaluate.py can rebuild
    the data splits to score the model on."""
    from transformers import AutoConfig, AutoModelForCausalLM

    hf_dir, out = Path(hf_dir), Path(out)
    if not (hf_dir / "config.json").is_file():
        raise ExportError(f"hf={hf_dir} has no config.json: give a local transformers model folder")
    try:
        hf_config = AutoConfig.from_pretrained(hf_dir, local_files_only=True)
    except (ValueError, KeyError, OSError) as err:
        raise ExportError(f"cannot import {hf_dir / 'config.json'}: {str(err).splitlines()[0]}") from None
    config = tinygpt_config(hf_config)
    family = FAMILIES[hf_config.model_type]
    tokenizer = read_tokenizer(hf_dir)
    if tokenizer.vocab_size > config.vocab_size:
        raise ExportError(
            f"cannot import {hf_dir}: the tokenizer has {tokenizer.vocab_size} ids, config.json's "
            f"vocab_size is {config.vocab_size}"
        )
    ckpt = checkpoints_dir(out) / IMPORTED_CHECKPOINT
    if (ckpt.exists() or record_path(out).exists()) and not overwrite:
        raise ExportError(f"out={out} already holds an imported model: choose a new folder, or overwrite=true")

    hf_model = AutoModelForCausalLM.from_pretrained(hf_dir, local_files_only=True, dtype=torch.float32)
    if type(hf_model).__name__ != family.hf_class:
        raise ExportError(
            f"cannot import {hf_dir}: transformers built {type(hf_model).__name__}, not {family.hf_class}"
        )
    model = GPT(config)
    model.load_state_dict(from_hf_state(hf_model.state_dict(), config, family), strict=True)
    model.eval()
    check_same_logits(model, hf_model, f"import of {hf_dir}")

    checkpoint = {
        "hyper_parameters": {"model": dict(vars(config))},
        "state_dict": {f"model.{k}": v for k, v in model.state_dict().items()},
        "tokenizer": tokenizer.to_json(),
        "global_step": 0,  # trained elsewhere: no tinygpt step
        "imported_from": {"folder": str(hf_dir.resolve()), "architecture": family.hf_class},
    }
    with atomic_write(ckpt, "wb") as file:
        torch.save(checkpoint, file)
    write_record(
        out,
        {
            "config": {**run_config, "model": dict(vars(config))},
            "parameters": model.num_parameters(),
            "run_dir": str(out),
            "status": "imported",
            "curve": [],
            "imported_from": checkpoint["imported_from"],
        },
    )
    return ckpt
