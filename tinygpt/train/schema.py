"""Typed schemas of the run's settings outside the model and data, checked before anything is written.

The model (``GPTConfig``) and data (``DataConfig``) validate themselves; this covers the rest: ``optim.*``
(``OptimConfig``), ``trainer.max_steps`` and ``trainer.val_check_interval``, ``checkpoint.*``, ``seed``,
``sample.*`` and ``sweep.*``. Each is a dataclass whose ``__post_init__`` names the field and what is
allowed, so a bad value fails in one line before the Trainer starts rather than as a ``ZeroDivisionError``
after it (``val_check_interval=0``), a numpy bounds message (``seed=-1``), or not at all
(``optim.grad_clip=-1`` trained by gradient ascent). The ``sweep`` schema is also registered in Hydra's
ConfigStore (``register_run_schemas``, listed first in conf/sweep/default.yaml) so a misspelled ``sweep.*`` key
or a wrong type fails at composition, before a multirun creates its folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from tinygpt.train.config_error import ConfigError, require
from tinygpt.train.optim import OptimConfig
from tinygpt.train.speedups import SpeedConfig

__all__ = ["ConfigError", "RunConfig", "register_run_schemas", "require", "validate_run_config"]

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

    def __post_init__(self) -> None:
        require(
            self.max_new_tokens >= 0,
            "sample.max_new_tokens",
            self.max_new_tokens,
            "a non-negative integer (0: no samples)",
        )
        require(self.temperature > 0, "sample.temperature", self.temperature, "a positive number")
        require(self.top_k is None or self.top_k > 0, "sample.top_k", self.top_k, "null or a positive integer")


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
    """What the console shows while training; values are checked by tinygpt/train/console.py."""

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
    """The schema of conf/train.yaml (stored as ``run_schema``, first in its defaults list): every top-level key
    typed, so ``seed=abc``, ``sample.top_kk=3`` or ``+lr_peak=1`` fails at composition naming the key. The groups
    (model, data, optim) have their own schemas in their own defaults lists; trainer and logger are passed to
    Lightning as written (``+trainer.<arg>=...`` adds any Trainer argument)."""

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
    model: Any = None
    data: Any = None
    optim: Any = None
    trainer: Any = None
    logger: Any = None


def _typed(cls, node: Any, prefix: str):
    """``node`` merged onto ``cls``'s schema: unknown keys and wrong types fail naming ``prefix.key``."""
    from omegaconf.errors import OmegaConfBaseException

    if OmegaConf.is_config(node):
        node = OmegaConf.to_container(node, resolve=True)
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(cls), node))
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None) or ""
        detail = str(err).strip().splitlines()[0]
        raise ConfigError(f"{prefix}.{key}: {detail}" if key else f"{prefix}: {detail}") from None
    except ConfigError:
        raise
    except ValueError as err:  # a schema's __post_init__ naming the field (SpeedConfig's)
        raise ConfigError(str(err)) from None


def validate_run_config(cfg: DictConfig) -> RunConfig:
    """Every setting outside model and data, checked; raises ValueError naming the first bad field.

    Returns the run's typed settings: the code reads these objects, not the raw config (model, data, trainer
    and logger stay nodes here: the model and data have their own typed readers, the Trainer takes its node)."""
    unknown = sorted(set(cfg) - set(RunConfig.__dataclass_fields__) - {"hydra"})
    if unknown:  # a key force-added with +key=... (composition rejects the others)
        raise ConfigError(
            f"{unknown[0]} is not a setting: the top-level keys are "
            f"{', '.join(RunConfig.__dataclass_fields__)} (tinygpt/train/schema.py's RunConfig)"
        )
    seed = cfg.seed
    require(_is_int(seed) and 0 <= seed < SEED_LIMIT, "seed", seed, f"an integer in [0, {SEED_LIMIT})")
    _typed(
        StepsConfig,
        {"max_steps": cfg.trainer.max_steps, "val_check_interval": cfg.trainer.val_check_interval},
        "trainer",
    )
    run = RunConfig(
        name=cfg.get("name", "default"),
        seed=seed,
        lr=cfg.get("lr", 1e-3),
        resume=cfg.get("resume", "auto"),
        ckpt_path=cfg.get("ckpt_path"),
        trial=cfg.get("trial"),
        custom_imports=list(cfg.get("custom_imports") or []),
        checkpoint=_typed(CheckpointConfig, cfg.checkpoint, "checkpoint"),
        sample=_typed(SampleConfig, cfg.sample, "sample"),
        progress=_typed(ProgressConfig, cfg.get("progress", {}), "progress"),
        diagnostics=_typed(DiagnosticsConfig, cfg.get("diagnostics", {}), "diagnostics"),
        score_once=_typed(ScoreOnceSchema, cfg.get("score_once", {}), "score_once"),
        speed=_typed(SpeedConfig, cfg.get("speed", {}), "speed"),
        sweep=_typed(SweepConfig, cfg.get("sweep", {}), "sweep"),
        model=cfg.model,
        data=cfg.data,
        optim=_typed(OptimConfig, cfg.optim, "optim"),
        trainer=cfg.trainer,
        logger=cfg.get("logger"),
    )
    return run


def register_run_schemas() -> None:
    """The train config's schema (conf/train.yaml), the sweep and optim groups' (their defaults list them first)."""
    ConfigStore.instance().store(name="run_schema", node=RunConfig)
    ConfigStore.instance().store(group="sweep", name="schema", node=SweepConfig)
    ConfigStore.instance().store(group="optim", name="schema", node=OptimConfig)
