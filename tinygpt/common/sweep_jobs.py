"""The jobs of a multirun's command line, as Hydra's basic sweeper launches them: what the sweep's preflight
checks before the first job is launched (tinygpt/train/preflight.py) and what the report expects to find
(tinygpt/report/jobs.py)."""

from __future__ import annotations

import itertools

from hydra.core.override_parser.types import Override

from tinygpt.common.errors import ConfigError


def expand_sweep(overrides: list[Override]) -> list[tuple[str, ...]]:
    """Every job of a multirun's parsed overrides, as Hydra's basic sweeper launches them: the cartesian
    product of each key's values, keys in the order they first appear (a repeated key keeps its first place and
    takes its last value), written ``key=value`` with the key's prefix (+, ++, ~) and quoting as parsed."""
    choices: dict[str, list[str]] = {}
    for override in overrides:
        key = override.get_key_element()
        if not override.is_sweep_override():
            choices[key] = [f"{key}={override.get_value_element_as_str()}"]
        elif override.is_discrete_sweep():
            choices[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:
            raise ConfigError(
                f"{override.input_line}: a basic sweep lists values (a,b, choice(...), range(...)); "
                f"{override.value_type.name} sweeps are not expanded"
            )
    return [tuple(job) for job in itertools.product(*choices.values())]
