"""A search's settings and its rules: the sweeper's schema, the objectives it may minimise, what it may not touch.

Everything here is read outside a search too (the config schemas every program registers, a run's check of its
``trial=`` key, the report's view of a sweep folder), so this module imports no Optuna: a run, a sweep or a report
that is not a search never loads it, and a machine without it (the lent GPU machine's kit:
docs/benchmarks/gpu.md) trains. The study itself (storage, space, sampler, pruner) is launch/study.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from tinygpt.common.errors import ConfigError

STUDY_FILE = "study.db"
TRIAL_DIR = "trial_{number:04d}"  # each trial's job folder in the sweep folder
TRIAL_KEY = "trial"  # the job's config key carrying its trial number (conf/train.yaml, RunConfig.trial)
# What a search may minimise: a field of the trial's run.json. Dev scores only: the held-out split is scored once,
# after the winner is registered (tinygpt-register), never to choose it.
OBJECTIVES = {
    "best.dev_bits_per_byte": "the best dev bits per byte of the run",
    "final.dev_bits_per_byte": "the dev bits per byte at the run's last step",
    "best.dev_loss": "the best dev loss (nats per token)",
    "final.dev_loss": "the dev loss at the run's last step",
}
HELD_OUT_WORDS = ("test", "held", "heldout")
# keys a search may neither vary nor fix: they decide which text is held out, or score it
HELD_OUT_KEYS = ("split", "data.test_fraction", "data.test_documents", "data.test_k", "data.split_seed")


def override_key(override: str) -> str:
    """An override's key, without its + / ++ / ~ prefix (``+trainer.x=1`` -> ``trainer.x``)."""
    return override.partition("=")[0].lstrip("+~")


class SearchRefused(ConfigError):
    """A search config the protocol refuses (one line naming the field), raised before a study is made."""


@dataclass
class SearchSweeperConf:
    """``hydra.sweeper`` of a search (conf/hydra/sweeper/optuna_search.yaml); the field names are
    hydra-optuna-sweeper's, so a lightning-hydra-template ``hparams_search`` file reads the same."""

    _target_: str = "hydra_plugins.tinygpt_search.search_sweeper.SearchSweeper"
    objective: str = "best.dev_bits_per_byte"
    direction: str = "minimize"
    study_name: str | None = None  # null: the run's `name`
    storage: str | None = None  # null: sqlite:///<sweep dir>/study.db
    n_trials: int = 20  # trials in the study in all (a rerun adds only the missing ones)
    n_jobs: int | None = None  # trials launched together, a batch at a time; null: as many as placement runs at once
    sampler: Any = field(default_factory=lambda: {"_target_": "optuna.samplers.TPESampler", "seed": 0})
    pruner: Any = None  # e.g. {_target_: optuna.pruners.MedianPruner, ...}; null: no trial is stopped early
    params: dict[str, str] = field(default_factory=dict)


def register_search_schema() -> None:
    """conf/hydra/sweeper/optuna_search.yaml lists this first, so a misspelled sweeper key fails at composition."""
    ConfigStore.instance().store(group="hydra/sweeper", name="optuna_search_schema", node=SearchSweeperConf)


def refuse_held_out(lines: Sequence[str]) -> None:
    """A search chooses on dev only: an override that names the held-out split, or changes which text is held
    out, is refused naming it."""
    for line in lines:
        key = override_key(line)
        value = line.split("=", 1)[1] if "=" in line else ""
        if key.split(".")[-1] == "split" or any(key == k or key.startswith(k + ".") for k in HELD_OUT_KEYS):
            raise SearchRefused(
                f"{line}: a search may not set {key} (value {value!r}): it chooses on the dev slice, and the held-out "
                "text is fixed by the experiment and scored once, after tinygpt-register"
            )


def check_objective(objective: str, direction: str) -> None:
    if any(word in objective.lower() for word in HELD_OUT_WORDS):
        raise SearchRefused(
            f"hydra.sweeper.objective={objective}: a held-out score cannot be a search's objective; a search "
            f"minimises a dev score ({', '.join(OBJECTIVES)}) and the held-out split is scored once, after "
            "tinygpt-register"
        )
    if objective not in OBJECTIVES:
        raise SearchRefused(f"hydra.sweeper.objective={objective}: not an objective; allowed: {', '.join(OBJECTIVES)}")
    if direction != "minimize":
        raise SearchRefused(
            f"hydra.sweeper.direction={direction}: {objective} is a cost (lower is better); allowed: minimize"
        )


def study_path(sweep_dir: str | Path) -> Path:
    return Path(sweep_dir) / STUDY_FILE


def in_search(hydra: DictConfig) -> bool:
    """Whether a job runs under the search sweeper (hydra: its ``hydra`` node)."""
    return "tinygpt_search" in str(OmegaConf.select(hydra, "sweeper._target_", default="") or "")
