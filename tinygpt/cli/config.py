"""The one call that registers the typed config schemas (Hydra's ConfigStore) and the resolvers, before composing.

Each entry point (tinygpt/cli/*, the Hydra scripts, the tests' compose helper) calls register_configs() once;
nothing registers by being imported, so what a config is checked against never depends on import order.
The schemas themselves live beside the code that reads them: the model families' (tinygpt/model/schema.py),
the data group's (tinygpt/data/config.py), and the run's top-level keys, optim and sweep
(tinygpt/train/schema.py). docs/architecture.md draws the tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from tinygpt.cli import CONF


def register_configs() -> None:
    """Store every schema and register the launcher configs' resolvers (idempotent: storing again replaces the
    same nodes, a resolver already there is kept)."""
    from tinygpt.data.config import register_data_schema
    from tinygpt.launch.resolvers import register_resolvers
    from tinygpt.launch.search_config import register_search_schema
    from tinygpt.model.schema import register_model_schema
    from tinygpt.train.schema import register_run_schemas

    register_model_schema()
    register_data_schema()
    register_run_schemas()
    register_search_schema()
    register_resolvers()


def compose_run_config(
    overrides: Sequence[str] = (), search_path: Sequence[Path] = (), return_hydra_config: bool = False
) -> DictConfig:
    """conf/train.yaml composed with ``overrides``, as ``tinygpt-train`` composes it: the Python API's ``compose``,
    the report's default reference, the bench and tinygpt-register's check all compose through it. ``search_path``:
    config folders of one's own, searched before the package's (``--config-dir``'s folders, a registered recipe's
    scratch folder); ``return_hydra_config`` keeps the ``hydra`` node (its ``runtime.choices`` name each group's
    choice). Inside a Hydra app whose search path is conf/ (evaluate's ``sweep_dir=``) it composes through that
    app's Hydra; elsewhere it initialises Hydra for the call."""
    register_configs()
    overrides = list(overrides)
    if search_path:
        overrides.append(f"hydra.searchpath=[{','.join(f'file://{Path(p).resolve()}' for p in search_path)}]")
    if GlobalHydra.instance().is_initialized():
        return compose("train", overrides=overrides, return_hydra_config=return_hydra_config)
    with initialize_config_dir(CONF, version_base="1.3"):
        return compose("train", overrides=overrides, return_hydra_config=return_hydra_config)
