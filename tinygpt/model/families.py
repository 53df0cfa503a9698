"""The model families a run can train, ``gpt`` and ``lstm``: their names and their dispatch, in one place.

A model config names its family in ``family`` (the GPT presets leave it out: ``gpt`` is the default, so every
existing config and checkpoint means what it did). Everything that builds a model from a config, the
LightningModule, the run and the checkpoint loader, asks this registry rather than naming a class.
"""

from __future__ import annotations

from typing import Any

from tinygpt.common.errors import require
from tinygpt.common.typed import typed
from tinygpt.model.gpt import GPT, GPTConfig
from tinygpt.model.lstm import CharLSTM, LSTMConfig
from tinygpt.model.speed import DEFAULT, SpeedConfig

FAMILIES: dict[str, tuple[type, type]] = {"gpt": (GPTConfig, GPT), "lstm": (LSTMConfig, CharLSTM)}


def family_of(model: Any) -> str:
    """The family a model config (dict, DictConfig or config dataclass) belongs to."""
    family = model.get("family", "gpt") if hasattr(model, "get") else getattr(model, "family", "gpt")
    require(family in FAMILIES, "model.family", family, "one of " + ", ".join(FAMILIES))
    return family


def config_from(model: Any):
    """The typed config of a model node or dict (a checkpoint's hparams, a run.json's config), read against its
    family's class (tinygpt/common/typed.py); a config object is returned as it is."""
    if any(isinstance(model, config_cls) for config_cls, _ in FAMILIES.values()):
        return model
    config_cls, _ = FAMILIES[family_of(model)]
    if config_cls is GPTConfig and hasattr(model, "get") and "family" in model:
        model = {k: v for k, v in model.items() if k != "family"}
    return typed(config_cls, model, "model")


def build_model(config: Any, speed: SpeedConfig = DEFAULT):
    """The model for a typed config or a plain dict of its fields (as saved in a checkpoint's hparams), built to
    compute as ``speed`` says (the speed switches that live in the model): its config's ``build``."""
    return config_from(config).build(speed)
