"""A setting's refusal: the error every typed config of a run raises, naming the field and what is allowed.

Its own module, below the configs that raise it (tinygpt/train/schema.py, optim.py, score_once.py), so none of
them imports another only for its error.
"""

from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """A setting with a value that is not allowed; raised before anything is written."""


def require(ok: bool, field: str, value: Any, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"{field}={value!r} is not allowed: must be {allowed}")
