"""The run's config as one typed tree, parsed once where a program starts, every value checked before anything is
written.

``RunConfig`` is both Hydra's schema of conf/train.yaml and the object the code reads: its groups are the classes
of the parts they configure (GPTConfig or LSTMConfig, DataConfig, OptimConfig, SpeedConfig) and the small ones
here (``checkpoint``, ``sample``, ``sweep``, ...). Each class's ``__post_init__`` names the field and what is
allowed, so a bad value fails in one line before the Trainer starts rather than as a ``ZeroDivisionError``
after it (``val_check_interval=0``), a numpy bounds message (``seed=-1``), or not at all
(``optim.grad_clip=-1`` trained by gradient ascent). ``parse_run_config`` is the one call from a composed
config to that tree (``OmegaConf.to_object``, tinygpt/common/typed.py).
"""

from __future__ import annotations

import difflib
import inspect
from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from tinygpt.common.errors import ConfigError, require
from tinygpt.common.typed import typed
from tinygpt.data.config import DataConfig
from tinygpt.data.errors import DataError
from tinygpt.model.families import config_from
from tinygpt.model.speed import SpeedConfig
from tinygpt.train.budget import BudgetConfig
from tinygpt.train.optim import OptimConfig

__all__ = ["ConfigError", "RunConfig", "register_run_schemas", "parse_run_config", "require"]

SEED_LIMIT = 2**32  # numpy's and Lightning's seeds are unsigned 32-bit


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass
class CheckpointConfig:
    every_n_steps: int = 50  # last.ckpt, the full training state
    keep_every_n_steps: int | None = None  # kept weights-only checkpoints; None: none

    def __post_init__(self) -> None:
        require(self.every_n_steps > 0, "checkpoint.every_n_steps", self.every_n_steps, "a positive integer")
        require(
            self.keep_every_n_steps is None or self.keep_every_n_steps > 0,
            "checkpoint.keep_every_n_steps",
            self.keep_every_n_steps,
            "null or a positive integer",
        )


@dataclass
class SampleConfig:
    prompt: str = "The Time Traveller"
    max_new_tokens: int = 200
    temperature: float = 0.8
    top_k: int | None = None
    top_p: float | None = None  # nucleus sampling, as tinygpt-generate's top_p

    def __post_init__(self) -> None:
        require(
            self.max_new_tokens >= 0,
            "sample.max_new_tokens",
            self.max_new_tokens,
            "a non-negative integer (0: no samples)",
        )
        require(self.temperature > 0, "sample.temperature", self.temperature, "a positive number")
        require(self.top_k is None or self.top_k > 0, "sample.top_k", self.top_k, "null or a positive integer")
        require(self.top_p is None or 0 < self.top_p <= 1, "sample.top_p", self.top_p, "null or a number in (0, 1]")


@dataclass
class SweepConfig:
    cpu_jobs: int = 1
    jobs_per_device: Any = 1  # a positive integer, or "auto" (tinygpt/launch/packing.py)
    simulate_devices: int | None = None
    lease_dir: str | None = None

    def __post_init__(self) -> None:
        require(self.cpu_jobs >= 1, "sweep.cpu_jobs", self.cpu_jobs, "a positive integer")
        require(
            self.jobs_per_device == "auto"
            or (isinstance(self.jobs_per_device, int) and not isinstance(self.jobs_per_device, bool))
            and self.jobs_per_device >= 1,
            "sweep.jobs_per_device",
            self.jobs_per_device,
            "a positive integer or auto",
        )
        require(
            self.simulate_devices is None or self.simulate_devices >= 1,
            "sweep.simulate_devices",
            self.simulate_devices,
            "null or a positive integer",
        )


@dataclass
class StepsConfig:
    """The two Trainer arguments tinygpt's step-based training depends on (the rest go to Lightning as given)."""

    max_steps: int = 150
    val_check_interval: int = 50

    def __post_init__(self) -> None:
        require(self.max_steps > 0, "trainer.max_steps", self.max_steps, "a positive integer")
        require(
            self.val_check_interval > 0,
            "trainer.val_check_interval",
            self.val_check_interval,
            "a positive integer (validate every N optimizer steps)",
        )


@dataclass
class ProgressConfig:
    """What the console shows while training; values are checked by tinygpt/train/callbacks/progress.py."""

    style: str = "auto"
    every_n_steps: int = 10


@dataclass
class DiagnosticsConfig:
    collapse_steps: list[int] = field(default_factory=list)


@dataclass
class ScoreOnceSchema:
    """The held-out scoring a run pre-registers; tinygpt/train/score_once.py checks the steps against
    trainer.max_steps and the kept checkpoints, and a resumed run against what run.json registered."""

    steps: list[int] = field(default_factory=list)
    recipe: str | None = None
    seeds: list[int] = field(default_factory=list)  # empty: any seed


@dataclass
class RunConfig:
    """The run's whole config as one typed tree: the schema of conf/train.yaml (stored as ``run_schema``, first in
    its defaults list) and the object a program turns the composed config into once (``parse_run_config``).

    Every top-level key is typed, so ``seed=abc`` or ``sample.top_kk=3`` fails at composition naming the key.
    ``model`` (GPTConfig, or LSTMConfig for ``model=lstm``), ``data`` (DataConfig) and ``optim`` (OptimConfig) are
    typed by their groups' schemas, first in each group's defaults list: OmegaConf has no unions of structured
    configs, and a default here would be merged under every group choice (a corpus's required ``path: ???``
    would inherit the default corpus's). A dict in their place (a run.json's config) is read into the same
    classes here. ``trainer``, ``logger`` and ``callbacks`` go to Lightning as written (``+trainer.<arg>=...`` adds any
    Trainer argument, ``+callbacks.<name>._target_=...`` any callback)."""

    name: str = "default"
    seed: int = 0
    lr: float = 1e-3
    resume: str = "auto"
    ckpt_path: str | None = None
    trial: int | None = None  # the Optuna trial this run is; set by the search sweeper (tinygpt/launch/search.py)
    custom_imports: list[str] = field(default_factory=list)  # modules of one's own (tinygpt/common/imports.py)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    sample: SampleConfig = field(default_factory=SampleConfig)
    progress: ProgressConfig = field(default_factory=ProgressConfig)
    diagnostics: DiagnosticsConfig = field(default_factory=DiagnosticsConfig)
    score_once: ScoreOnceSchema = field(default_factory=ScoreOnceSchema)
    speed: SpeedConfig = field(default_factory=SpeedConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    budget: BudgetConfig = field(default_factory=BudgetConfig)  # budget.flops: the steps a compute budget buys
    model: Any = None  # GPTConfig | LSTMConfig
    data: Any = None  # DataConfig
    optim: Any = None  # OptimConfig
    trainer: Any = None  # Lightning's Trainer arguments
    logger: Any = None  # Lightning loggers, by name, as hydra.utils.instantiate targets
    callbacks: Any = None  # Lightning callbacks, by name, as hydra.utils.instantiate targets (conf/callbacks/)

    def __post_init__(self) -> None:
        require(
            _is_int(self.seed) and 0 <= self.seed < SEED_LIMIT, "seed", self.seed, f"an integer in [0, {SEED_LIMIT})"
        )
        if self.model is not None:
            self.model = config_from(self.model)
        if self.data is not None:
            self.data = typed(DataConfig, self.data, "data", DataError)
        if self.optim is not None:
            self.optim = typed(OptimConfig, self.optim, "optim", ConfigError)
        if self.trainer is not None:
            check_steps(self.trainer)


def check_steps(trainer: Any) -> None:
    """trainer.max_steps and val_check_interval (StepsConfig): checked first, since other settings derive from
    them (checkpoint.keep_every_n_steps is ${trainer.val_check_interval}), so the error names the one given.
    Every other key must be an argument of Lightning's ``Trainer`` (``+trainer.<arg>=...`` adds one): a misspelled
    one is refused here, with the closest argument, not by the Trainer after the run's folder exists."""
    from lightning import Trainer  # here: every program registers this schema, and most never build a Trainer

    arguments = [name for name in inspect.signature(Trainer.__init__).parameters if name != "self"]
    for key in trainer:
        if key not in arguments:
            close = difflib.get_close_matches(str(key), arguments, n=1)
            hint = f"; did you mean trainer.{close[0]}?" if close else ""
            raise ConfigError(f"trainer.{key} is not an argument of Lightning's Trainer{hint}")
    typed(
        StepsConfig,
        {"max_steps": trainer.get("max_steps"), "val_check_interval": trainer.get("val_check_interval")},
        "trainer",
        ConfigError,
    )


def parse_run_config(cfg: DictConfig) -> RunConfig:
    """The composed config as its typed tree, every value checked before anything is written: raises
    ConfigError (DataError, ValueError from a model config) naming the first bad field. Done once, where a
    program starts; the code below reads these objects. Interpolations are resolved here. ``cfg``: without Hydra's
    own node (tinygpt/train/preflight.py's ``without_hydra``)."""
    if OmegaConf.get_type(cfg) is not RunConfig:  # a config composed without run_schema (a Python caller's)
        raise ConfigError("the config is not a composed train config: compose conf/train.yaml (tinygpt.compose)")
    top = list(RunConfig.__dataclass_fields__)
    unknown = sorted(set(cfg) - set(top))
    if unknown:  # a key force-added with +key=... (composition rejects the others)
        raise ConfigError(
            f"{unknown[0]} is not a setting: the top-level keys are {', '.join(top)} "
            "(tinygpt/train/schema.py's RunConfig)"
        )
    try:
        check_steps(cfg.trainer)
        return typed(RunConfig, cfg, "", ConfigError)
    except (ConfigError, DataError):
        raise
    except ValueError as err:  # a model config's own check (GPTConfig.n_heads=5 ...): a setting, so one line
        raise ConfigError(str(err)) from None


def register_run_schemas() -> None:
    """The train config's schema (conf/train.yaml), the sweep and optim groups' (their defaults list them first)."""
    ConfigStore.instance().store(name="run_schema", node=RunConfig)
    ConfigStore.instance().store(group="sweep", name="schema", node=SweepConfig)
    ConfigStore.instance().store(group="optim", name="schema", node=OptimConfig)
