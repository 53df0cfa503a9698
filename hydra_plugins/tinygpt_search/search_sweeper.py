"""tinygpt's Hydra Sweeper for ``-m hparams_search=<name>``: an Optuna study over tinygpt jobs (launch/search.py).

Hydra finds sweepers only in the ``hydra_plugins`` namespace package, so this class lives here and does nothing
but hand Hydra's launcher and config to ``tinygpt.launch.search.run_search``. The sweeper's settings are read
from the composed ``hydra.sweeper`` node itself rather than from the constructor's arguments: Hydra instantiates
plugins recursively, which would turn the ``sampler`` and ``pruner`` nodes into objects, and the study's trials
need the nodes (each job builds the same pruner from them).

Hydra imports every module of ``hydra_plugins`` when any program starts, so this one imports nothing heavy:
the search itself (and with it Optuna) is imported when a search sweeps, as hydra-optuna-sweeper imports its
``_impl``. A run that is not a search never loads Optuna (tests/test_search.py runs one without it).
"""

from __future__ import annotations

import sys
from typing import Any

from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from tinygpt.launch.search_config import SearchRefused


class SearchSweeper(Sweeper):
    def __init__(self, **_settings: Any) -> None:
        super().__init__()
        self.config: DictConfig | None = None
        self.launcher = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None and self.launcher is not None
        from tinygpt.launch.search import run_search

        try:
            return run_search(self.config.hydra.sweeper, self.config, self.launcher, arguments)
        except SearchRefused as refused:  # a user's mistake: one line, before anything is written, no traceback
            print(f"[tinygpt] refused: {refused}", file=sys.stderr, flush=True)
            sys.exit(2)
