"""The one error for a bad value: every config, corpus, recipe and export refusal raises ConfigError or a subclass.

A user's mistake (a setting, a file, a choice) is not a bug: every program turns these into one line naming the
field, file or value and what is allowed (tinygpt/cli/errors.py), while any other exception keeps its traceback.
Here, at the bottom, so that each package's own kind (``DataError``, ``ExportError``, ...) can subclass it without
importing a layer above its own.
"""

from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """A setting, file or value that is not allowed; raised before anything is written."""


class PathError(ConfigError, FileNotFoundError):
    """A path the user gave that is missing or holds nothing usable (no run.json, no checkpoints, no sweep)."""


def require(ok: bool, field: str, value: Any, allowed: str, error: type[ConfigError] = ConfigError) -> None:
    """The one value check: unless ``ok``, raise ``error`` (ConfigError or a package's subclass of it) in the one
    shape every refusal of a value has, ``<field>=<value> is not allowed: must be <allowed>``."""
    if not ok:
        raise error(f"{field}={value!r} is not allowed: must be {allowed}")
