"""Before a run writes anything: every setting parsed, the score-once pre-registration and the callbacks checked.

A bad value must end the command in one line with nothing written (no folder, no lock, no log). ``train()``
checks here first, before it locks the run's folder, so a Python caller is refused with its folder untouched.
But on the command line Hydra makes the job's folder, its ``.hydra/`` and its ``train.log`` before the task
function runs; so the same check also runs as a Hydra callback (``hydra.callbacks.config_preflight``), in
``on_run_start``, before Hydra's job begins, as the data root's check does (tinygpt/data/preflight.py).

The config is parsed once a run: the callback keeps what it parsed (``take_checked``), and the program hands it to
``train()``, which parses only a config that nothing has parsed yet (a Python caller's, a sweep job's).

A multirun's base config is not any job's (``seed=1,2,3`` is swept in later: the base's seed need not be a
registered one), so a sweep's jobs are each composed and checked in ``on_multirun_start``, before the sweeper
writes its multirun.yaml or launches a job; ``train()`` checks each again when it starts.
"""

from __future__ import annotations

import copy
import traceback
from pathlib import Path
from typing import Any

from hydra import compose
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf, open_dict

from tinygpt.common.imports import import_modules
from tinygpt.common.say import fail, full_errors, say
from tinygpt.common.sweep_jobs import expand_sweep
from tinygpt.data.errors import DataError
from tinygpt.train import device_settings
from tinygpt.train.callbacks import build_callbacks
from tinygpt.train.schema import ConfigError, RunConfig, parse_run_config
from tinygpt.train.score_once import check_score_once
from tinygpt.train.trackers import check_trackers

# the run this process's single run was parsed into by ConfigPreflight, until the program takes it
_checked: list[RunConfig] = []


def without_hydra(cfg: DictConfig) -> DictConfig:
    """The run's config without Hydra's own node (present when composed with return_hydra_config, and in a Hydra
    callback's config), which is not the run's and resolves only inside a job; ``cfg`` itself is left as it is."""
    if "hydra" not in cfg:
        return cfg
    cfg = copy.copy(cfg)
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg


def check_run_config(cfg: DictConfig) -> RunConfig:
    """The run's typed tree, every value checked, and its pre-registration's steps and seed checked: raises
    ConfigError (or DataError) naming the field. Reads no folder: what a resumed run registered before is checked
    against it under the run's lock (tinygpt/train/run.py)."""
    cfg = without_hydra(cfg)
    try:  # parts of the user's own register themselves before the config is checked (tinygpt/common/imports.py)
        import_modules(cfg.get("custom_imports"))
    except ImportError as err:
        raise ConfigError(str(err)) from None
    run = parse_run_config(cfg)
    # a precision Lightning does not know, an accelerator this machine lacks: one line now, not a traceback later
    device_settings.choose(run.trainer.get("accelerator", "auto"), run.trainer.get("precision", "auto"))
    check_trackers(run.logger)  # logger=wandb without wandb installed: the pip command, now
    once = run.score_once
    check_score_once(
        list(once.steps),
        once.recipe,
        list(once.seeds),
        run.seed,
        run.trainer["max_steps"],
        run.checkpoint.keep_every_n_steps,
    )
    return run


def take_checked() -> RunConfig | None:
    """The run ConfigPreflight parsed for this process's single run, once; None where it parsed none (a
    multirun's job, a Python caller, the callback left out of ``hydra.callbacks``)."""
    return _checked.pop() if _checked else None


class ConfigPreflight(Callback):
    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        _checked.clear()
        try:
            run = check_run_config(config)
            # the callbacks built once to check them (a misspelt _target_, a bad value), as train() builds them;
            # the job's folder is not known yet, and building one writes nothing
            build_callbacks(run, Path.cwd())
            _checked.append(run)
        except (ConfigError, DataError) as err:
            if full_errors():  # HYDRA_FULL_ERROR=1: the traceback too (docs/runs.md); Hydra would swallow a raise
                traceback.print_exc()  # from a callback as a warning and go on to make the job's folder
            raise fail(str(err)) from None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Every job of a basic sweep composed and checked before its sweeper writes anything (multirun.yaml, a job's
        folder): a misspelt choice or a bad value in any job refuses the whole sweep in one line naming the job,
        and an earlier sweep's files in the folder are left as they were. A search's jobs are its sampler's,
        known only as it draws them: each is checked when it starts."""
        hydra = config.hydra
        if not str(OmegaConf.select(hydra, "sweeper._target_") or "").endswith("BasicSweeper"):
            return
        jobs = expand_sweep(OverridesParser.create().parse_overrides(list(hydra.overrides.task)))
        if len(jobs) > 20:  # Hydra composes a job's config in about 0.2 s: say why the first job waits
            say(f"checking the sweep's {len(jobs)} jobs before launching any")
        for job in jobs:
            try:
                check_run_config(compose(config_name=hydra.job.config_name, overrides=list(job)))
            except Exception as err:  # noqa: BLE001 - a composition error of Hydra's or a value's: the job's line
                if full_errors():
                    traceback.print_exc()
                first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                raise fail(f"sweep job {' '.join(job)}: {first}; nothing of the sweep was written") from None
