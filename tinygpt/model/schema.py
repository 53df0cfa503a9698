"""GPTConfig as the schema of Hydra's ``model`` group.

Every preset in conf/model/ starts from ``schema`` in its defaults list, so each composed model config has
every field of :class:`GPTConfig` (``model.n_experts=4`` works on any preset) and a misspelled key or a
wrong type fails at composition, naming the key."""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from tinygpt.model.gpt import GPTConfig
from tinygpt.model.lstm import LSTMConfig


def register_model_schema() -> None:
    ConfigStore.instance().store(group="model", name="schema", node=GPTConfig)
    ConfigStore.instance().store(group="model", name="lstm_schema", node=LSTMConfig)  # model=lstm
