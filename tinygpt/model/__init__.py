"""The GPT model: every architecture switch of the spec, chosen by config alone."""

from .config import GPTConfig
from .families import FAMILIES, build_model, config_from, family_of
from .generate import generate
from .gpt import GPT, GPTOutput
from .kv_cache import KVCache, kv_cache_bytes_per_token
from .lstm import CharLSTM, LSTMConfig
from .params import build_on_meta, parameter_breakdown

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
