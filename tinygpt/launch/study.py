"""The Optuna study behind ``-m hparams_search=<name>``: its space, storage, sampler and pruner.

A search is one Optuna study kept in ``<sweep dir>/study.db`` (SQLite), so a killed search run again continues
the same study, and the trials' training processes (tinygpt jobs placed like any sweep's) open the same
storage to report their dev scores for pruning. Optuna does the sampling (TPE by default), pruning and storage;
this module turns the sweeper's Hydra config into Optuna objects. What a search may not search (the held-out
split) and the sweeper's schema are launch/search_config.py's, which imports no Optuna: only a search's own
processes (the sweeper, its trials, the report and register of its folder) load this module.

The search space is written in Hydra's override grammar, as hydra-optuna-sweeper and the lightning-hydra-template
write it: ``choice(a, b)`` categorical, ``interval(lo, hi)`` a float (``tag(log, interval(...))`` log-uniform,
``tag(int, interval(...))`` an integer), ``range(lo, hi, step)`` integers as Hydra's range expands them (``hi``
excluded). It is parsed with Hydra's public ``OverridesParser``.

Why not Hydra's own ``hydra-optuna-sweeper``: its 1.3 release pins ``optuna<3`` (2.10, from 2021) and its
SQLite storage fails under SQLAlchemy 2, so tinygpt drives a current Optuna through a sweeper plugin of its own
(``hydra_plugins/tinygpt_search``) with the same config keys (``params``, ``n_trials``, ``n_jobs``,
``sampler``, ``pruner``, ``direction``, ``storage``, ``study_name``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, Override, RangeSweep
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from tinygpt.common.errors import PathError
from tinygpt.launch.search_config import (
    STUDY_FILE,
    TRIAL_KEY,
    SearchRefused,
    SearchSweeperConf,
    override_key,
    refuse_held_out,
    study_path,
)


@dataclass
class Space:
    """The searched parameters (name -> Optuna distribution) and the overrides every trial shares."""

    distributions: dict[str, optuna.distributions.BaseDistribution]
    fixed: list[str]
    source: dict[str, str]  # name -> the override text it came from, kept in the study to check a resume


def distribution(override: Override) -> optuna.distributions.BaseDistribution:
    """The Optuna distribution of one sweep override (choice, range, interval; tags log and int)."""
    value, key = override.value(), override.get_key_element()
    tags = getattr(value, "tags", set()) or set()
    if isinstance(value, ChoiceSweep):
        return optuna.distributions.CategoricalDistribution(list(value.list))
    if isinstance(value, RangeSweep):
        items = list(override.sweep_iterator())
        if all(isinstance(x, int) and not isinstance(x, bool) for x in items) and len(items) > 1:
            step = items[1] - items[0]
            return optuna.distributions.IntDistribution(items[0], items[-1], log="log" in tags, step=step)
        return optuna.distributions.CategoricalDistribution(items)
    if isinstance(value, IntervalSweep):
        if "int" in tags:
            return optuna.distributions.IntDistribution(int(value.start), int(value.end), log="log" in tags)
        return optuna.distributions.FloatDistribution(value.start, value.end, log="log" in tags)
    raise SearchRefused(f"hydra.sweeper.params.{key}: {override.input_line!r} is not choice(), range() or interval()")


def parse_space(params: Mapping[str, str], arguments: Sequence[str]) -> Space:
    """The space from ``hydra.sweeper.params`` and the command line (a sweep there, e.g. ``lr=interval(...)``,
    is searched too; a plain value is fixed for every trial), checked against ``refuse_held_out``."""
    lines = [f"{key}={value}" for key, value in (params or {}).items()] + list(arguments)
    refuse_held_out(lines)
    parsed = OverridesParser.create().parse_overrides(lines)
    distributions, fixed, source = {}, [], {}
    for override, line in zip(parsed, lines, strict=True):
        key = override.get_key_element()
        if override.is_sweep_override():
            distributions[key] = distribution(override)
            source[key] = line
        else:
            fixed.append(line)
    if not distributions:
        raise SearchRefused("hydra.sweeper.params: nothing to search; give e.g. lr='tag(log, interval(3e-4, 3e-3))'")
    return Space(distributions, fixed, source)


def storage_url(storage: str | None, sweep_dir: str | Path) -> str:
    return storage or f"sqlite:///{Path(sweep_dir).resolve() / STUDY_FILE}"


def build(node: Any) -> Any:
    """A sampler or pruner from its ``_target_`` node (None stays None)."""
    if node is None:
        return None
    return instantiate(OmegaConf.create(node) if not OmegaConf.is_config(node) else node)


def open_study(sweeper: Any, sweep_dir: str | Path, name: str, *, create: bool = True) -> optuna.Study:
    """The search's study: created on the first launch, loaded on every later one (and in each trial's job)."""
    url = storage_url(sweeper.storage, sweep_dir)
    study_name = sweeper.study_name or name
    pruner = build(sweeper.pruner)
    if not create:  # a trial's job reports and asks its pruner; it samples nothing
        return optuna.load_study(study_name=study_name, storage=url, pruner=pruner)
    study = optuna.create_study(
        storage=url, study_name=study_name, direction=sweeper.direction, pruner=pruner, load_if_exists=True
    )
    # A continued study: a sampler seeded as before would draw the first trial's values again (its random start
    # has no memory of the study), so its seed moves on by the trials already there: deterministic, and new.
    node = sweeper.sampler
    if node is not None and node.get("seed") is not None and study.trials:
        node = OmegaConf.merge(node, {"seed": int(node.seed) + len(study.trials)})
    study.sampler = build(node) if node is not None else optuna.samplers.TPESampler()
    return study


def load_finished_study(sweep_dir: str | Path) -> optuna.Study:
    """A search folder's study for reading (report, register): the storage and name its multirun.yaml used."""
    sweep_dir = Path(sweep_dir)
    saved = OmegaConf.load(sweep_dir / "multirun.yaml")
    sweeper = OmegaConf.merge(OmegaConf.structured(SearchSweeperConf), saved.hydra.sweeper)
    if not study_path(sweep_dir).exists() and sweeper.storage is None:
        raise PathError(f"{sweep_dir}: no {STUDY_FILE}; is it a search's folder (-m hparams_search=...)?")
    return optuna.load_study(
        study_name=sweeper.study_name or saved.name, storage=storage_url(sweeper.storage, sweep_dir)
    )


def remember_space(study: optuna.Study, space: Space, objective: str, execution: Sequence[str] = ()) -> None:
    """Store what the study searches; a later launch of the same folder must search the same thing. ``execution``:
    keys that only say where or how a job runs (the sweep's ``override_dirname.exclude_keys``: progress.*, sweep.*,
    data.root, ...), which a later launch may change, as a rerun of any sweep may."""

    def what(fixed: Sequence[str]) -> list[str]:
        # in any order: the same overrides in another order compose the same config
        return sorted(line for line in fixed if override_key(line) not in set(execution))

    searched = {"params": space.source, "fixed": space.fixed, "objective": objective}
    before = study.user_attrs.get("search")
    if before is None:
        study.set_user_attr("search", searched)
        return
    for key, now in searched.items():
        then = before.get(key)
        if key == "fixed":
            then, now = what(then or []), what(now)
        if then != now:
            raise SearchRefused(
                f"this folder's study searched {key}={json.dumps(then)}, not {json.dumps(now)}: "
                "continue it with the same search, or give the new one its own name= or hydra.sweep.dir="
            )


def trial_of(study: optuna.Study, number: int) -> optuna.trial.Trial:
    """The study's trial ``number``, to report to from the process that trains it (the sweeper asked for it)."""
    for frozen in study.get_trials(deepcopy=False):
        if frozen.number == number:
            # Optuna identifies a trial in its storage by an id that FrozenTrial keeps private; optuna-integration's
            # callbacks read it the same way to report from a worker process.
            return optuna.trial.Trial(study, frozen._trial_id)
    raise KeyError(f"{TRIAL_KEY}={number}: the study has no such trial")


def job_trial(hydra: DictConfig, name: str, number: int) -> optuna.trial.Trial:
    """Inside a trial's job: its trial in the study its sweeper runs (hydra: the job's ``hydra`` node)."""
    sweeper = OmegaConf.merge(OmegaConf.structured(SearchSweeperConf), hydra.sweeper)
    return trial_of(open_study(sweeper, hydra.sweep.dir, name, create=False), number)
