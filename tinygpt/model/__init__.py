"""The GPT model: every architecture switch of the spec, chosen by config alone."""

from tinygpt.model.families import FAMILIES, build_model, config_from, family_of
from tinygpt.model.generate import generate
from tinygpt.model.gpt import GPT, GPTConfig, GPTOutput, KVCache, kv_cache_bytes_per_token
from tinygpt.model.lstm import CharLSTM, LSTMConfig
from tinygpt.model.params import build_on_meta, parameter_breakdown

__all__ = [
    "GPT",
    "GPTConfig",
    "CharLSTM",
    "GPTOutput",
    "LSTMConfig",
    "KVCache",
    "FAMILIES",
    "build_model",
    "build_on_meta",
    "config_from",
    "family_of",
    "generate",
    "kv_cache_bytes_per_token",
    "parameter_breakdown",
]
