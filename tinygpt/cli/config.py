"""The one call that registers every typed config schema with Hydra's ConfigStore, before any composition.

Each entry point (tinygpt/cli/*, the Hydra scripts, the tests' compose helper) calls register_configs() once;
nothing registers by being imported, so what a config is checked against never depends on import order.
The schemas themselves live beside the code that reads them: the model families' (tinygpt/model/schema.py),
the data group's (tinygpt/data/config.py), and the run's top-level keys, optim and sweep
(tinygpt/train/schema.py). docs/architecture.md draws the tree.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from tinygpt.cli import CONF


def register_configs() -> None:
    """Store every schema (idempotent: storing again replaces the same nodes)."""
    from tinygpt.data.config import register_data_schema
    from tinygpt.launch.study import register_search_schema
    from tinygpt.model.schema import register_model_schema
    from tinygpt.train.schema import register_run_schemas

    register_model_schema()
    register_data_schema()
    register_run_schemas()
    register_search_schema()


def compose_run_config(overrides: Sequence[str] = ()) -> DictConfig:
    """conf/train.yaml composed with ``overrides``, as ``tinygpt-train`` composes it: the Python API's ``compose``
    and the report's default reference use it. Inside a Hydra app whose search path is conf/ (evaluate's
    ``sweep_dir=``) it composes through that app's Hydra; elsewhere it initialises Hydra for the call."""
    register_configs()
    if GlobalHydra.instance().is_initialized():
        return compose("train", overrides=list(overrides))
    with initialize_config_dir(CONF, version_base="1.3"):
        return compose("train", overrides=list(overrides))
