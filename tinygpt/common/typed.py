"""A config turned into the dataclass it was checked against: the one reader from settings to typed objects.

A Hydra config composed from tinygpt's structured configs is already typed: every group's defaults list starts
with its dataclass (``model/schema`` is GPTConfig, ``data/schema`` DataConfig, ``run_schema`` RunConfig), so
``OmegaConf.to_object`` gives the whole tree as those classes at once, running each ``__post_init__`` (the value
checks, which name the field). A program does that once at its entry (``tinygpt/train/schema.py``'s
``parse_run_config``). What is not composed (a run.json's config, a checkpoint's hparams, a dict from a Python
caller) is merged onto the same class's schema, so it is held to the same keys, types and checks.

OmegaConf checks everything but one thing: a key force-added with Hydra's ``+key=value`` to a typed node passes
composition and ``to_object`` then sets it as a stray attribute. ``forced_keys`` finds those first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException

T = TypeVar("T")


def forced_keys(node: DictConfig, prefix: str = "") -> list[tuple[str, type]]:
    """(full key, dataclass) of each key of ``node`` (and its typed children) that is not a field of its node's
    dataclass."""
    found = []
    schema = OmegaConf.get_type(node)
    names = {f.name for f in fields(schema)} if is_dataclass(schema) else None
    for key in node.keys():
        full = f"{prefix}{key}"
        if names is not None and key not in names:
            found.append((full, schema))
        elif not OmegaConf.is_missing(node, key) and isinstance(child := node[key], DictConfig):
            found += forced_keys(child, f"{full}.")
    return found


def full_key(prefix: str, key: str) -> str:
    """``prefix.key``; a node that is a child of a composed config already names its full key."""
    if not prefix or key == prefix or key.startswith(f"{prefix}."):
        return key or prefix
    return f"{prefix}.{key}" if key else prefix


def missing(key: str) -> str:
    return f"{key} is required: give it with {key}=<value> (it is ??? in the config)"


def schema_error(err: OmegaConfBaseException, prefix: str = "") -> str:
    """OmegaConf's first line after the full key; an unknown key also gets the keys allowed there."""
    key = full_key(prefix, getattr(err, "full_key", None) or "")
    if isinstance(err, MissingMandatoryValue):
        return missing(key)
    message = f"{key or 'config'}: {str(err).strip().splitlines()[0]}"
    schema = getattr(err, "object_type", None)
    if isinstance(err, ConfigKeyError) and is_dataclass(schema):
        message += f"; allowed: {', '.join(f.name for f in fields(schema))}"
    return message


def typed(cls: type[T], values: Any, prefix: str = "", error: type[Exception] = ValueError) -> T:
    """``values`` as a ``cls``: a node Hydra typed as ``cls`` directly; a plain mapping (or an untyped node)
    merged onto ``cls``'s defaults. Unknown keys, wrong types and missing values raise ``error`` naming
    ``prefix.key``; ``cls``'s own checks raise what they raise."""
    if isinstance(values, cls):
        return values
    if isinstance(values, DictConfig) and OmegaConf.get_type(values) is cls:
        for key, schema in forced_keys(values):
            where = full_key(prefix, key)
            allowed = ", ".join(f.name for f in fields(schema))
            raise error(f"{where} is not a setting of {schema.__name__}; allowed: {allowed}")
        node = values
    elif isinstance(values, Mapping):
        try:
            given = OmegaConf.create(dict(values))
            for key in sorted(OmegaConf.missing_keys(given)):  # ??? would not write over cls's default
                raise error(missing(full_key(prefix, key)))
            node = OmegaConf.merge(OmegaConf.structured(cls), given)
        except OmegaConfBaseException as err:
            raise error(schema_error(err, prefix)) from None
    else:
        raise error(f"{prefix or cls.__name__}: expected a mapping of {cls.__name__}'s fields, got {values!r}")
    try:
        return OmegaConf.to_object(node)
    except OmegaConfBaseException as err:
        raise error(schema_error(err, prefix)) from None
