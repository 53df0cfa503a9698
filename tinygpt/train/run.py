"""One training run from a composed config: data, model, Trainer, callbacks; resume; the run record."""

from __future__ import annotations

import math
import shlex
from dataclasses import replace
from pathlib import Path

import lightning as L
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from hydra.utils import instantiate
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf

from tinygpt.common.run_folder import (
    DEV_BITS_PER_BYTE,
    KEPT_CHECKPOINT,
    checkpoints_dir,
    is_finished_and_skipped,
    last_checkpoint,
    read_record,
    record_path,
)
from tinygpt.common.say import say
from tinygpt.data import TextDataModule
from tinygpt.launch.placement import apply_placement
from tinygpt.launch.precision import DeviceChoice, choose, device_kind
from tinygpt.launch.search_config import TRIAL_KEY, in_search
from tinygpt.model import GPTConfig, families
from tinygpt.model.lstm import LSTMConfig
from tinygpt.train import device_settings
from tinygpt.train.checkpoints import AtomicCheckpointIO, check_resumable, read_checkpoint, resume_path
from tinygpt.train.console import progress_callback, silence_third_party_tips
from tinygpt.train.device_settings import DeviceSettings
from tinygpt.train.diagnostics import CollapseDiagnostics
from tinygpt.train.last_checkpoint import LastCheckpoint, TrainingInterrupted
from tinygpt.train.logs import OptimizerStepAxis, resume_kwargs
from tinygpt.train.module import GPTModule
from tinygpt.train.preflight import check_run_config
from tinygpt.train.record import RunRecord
from tinygpt.train.runlock import RunFolderBusy, lock_run
from tinygpt.train.sampling import TextSampler
from tinygpt.train.schema import ConfigError, RunConfig, without_hydra
from tinygpt.train.score_once import check_pre_registration, pre_registration
from tinygpt.train.speed import SpeedMonitor


def model_config(run: RunConfig, vocab_size: int) -> GPTConfig | LSTMConfig:
    """The run's model config with the vocabulary filled from the tokenizer; fails before training."""
    if run.model.vocab_size == 0:
        return replace(run.model, vocab_size=vocab_size)
    if run.model.vocab_size < vocab_size:
        raise ConfigError(
            f"model.vocab_size={run.model.vocab_size} is smaller than the tokenizer's "
            f"{vocab_size}; set model.vocab_size=0 to take the tokenizer's"
        )
    return run.model


def hparams(run: RunConfig, config: GPTConfig | LSTMConfig) -> dict:
    """The switches shown in TensorBoard's hparams tab."""
    return {
        **{f"model/{k}": ("null" if v is None else v) for k, v in vars(config).items()},
        **{f"optim/{k}": str(v) if isinstance(v, list) else v for k, v in vars(run.optim).items()},
        "data/name": run.data.name,
        "data/tokenizer": run.data.tokenizer.name,
        "data/fraction": str(run.data.fraction),
        "seed": run.seed,
        "max_steps": run.trainer["max_steps"],
    }


def build_callbacks(run: RunConfig, run_dir: Path, module: GPTModule, datamodule, record: RunRecord) -> list:
    ckpt_dir = checkpoints_dir(run_dir)
    callbacks = [
        # last.ckpt: the full training state, for resume; after the validation of a scoring step, at the end,
        # and on SIGINT/SIGTERM (tinygpt/train/last_checkpoint.py)
        LastCheckpoint(ckpt_dir, run.checkpoint.every_n_steps, run.trainer["val_check_interval"], datamodule.has_dev),
        OptimizerStepAxis(),
        SpeedMonitor(
            families.flops_per_token(module.model),
            peak_flops=run.speed.peak_flops,  # None: measured at the start of training
            precision=str(run.trainer["precision"]),
            on_peak=record.note_peak,
        ),
        TextSampler(
            datamodule.tokenizer,
            run.sample.prompt,
            run.sample.max_new_tokens,
            run.sample.temperature,
            run.sample.top_k,
            run.seed,
        ),
        record,
    ]
    if run.diagnostics.collapse_steps:
        callbacks.append(CollapseDiagnostics(list(run.diagnostics.collapse_steps), record))
    if run.trial is not None:  # a search's trial: its dev scores go to the study, whose pruner may stop it
        # imported here: Optuna is loaded by a search's trials alone (launch/search_config.py says why)
        from tinygpt.launch.study import job_trial
        from tinygpt.train.pruning import TrialPruning

        callbacks.append(TrialPruning(job_trial(HydraConfig.get(), run.name, run.trial)))
    if run.checkpoint.keep_every_n_steps:
        # kept checkpoints at the scoring steps: weights only, for evaluate.py and generate.py. monitor="step"
        # keeps them all and gives this callback its own state key beside the last.ckpt one
        callbacks.append(
            ModelCheckpoint(
                dirpath=ckpt_dir,
                filename=KEPT_CHECKPOINT,
                auto_insert_metric_name=False,
                monitor="step",
                mode="max",
                save_top_k=-1,
                save_weights_only=True,
                every_n_train_steps=run.checkpoint.keep_every_n_steps,
            )
        )
    return callbacks


def build_datamodule(run: RunConfig) -> TextDataModule:
    """The run's DataModule, set up for fitting (splits made, tokenizer fitted on the training split)."""
    L.seed_everything(run.seed, workers=True)
    datamodule = TextDataModule(run.data, context_length=run.model.context_length, seed=run.seed)
    datamodule.setup("fit")
    return datamodule


def device_speed(run: RunConfig, kind: str | None = None) -> DeviceSettings:
    """The speed switches resolved for the device the run trains on (``kind``; default: the one
    ``trainer.accelerator`` picks): tinygpt/train/device_settings.py."""
    kind = kind or device_kind(run.trainer["accelerator"])[0]
    return device_settings.resolve(run.speed, kind, bool(run.trainer.get("deterministic")))


def build_module(run: RunConfig, datamodule: TextDataModule, speed: DeviceSettings | None = None) -> GPTModule:
    """The run's LightningModule; the model's initialisation depends on the seed alone, not on data setup."""
    config = model_config(run, datamodule.vocab_size)
    speed = speed or device_speed(run)
    L.seed_everything(run.seed, workers=True)
    return GPTModule(
        config,
        run.optim,
        run.trainer["max_steps"],
        datamodule.tokenizer.to_json(),
        speed=speed.speed,
        custom_imports=list(run.custom_imports),
    )


def resolve_precision(run: RunConfig) -> tuple[RunConfig, DeviceChoice]:
    """``run`` with ``trainer.precision=auto`` replaced by the device's precision (tinygpt/launch/precision.py),
    and the choice; the run records and pre-registers the resolved value."""
    device = choose(run.trainer["accelerator"], run.trainer["precision"])
    if str(run.trainer["precision"]) == device.precision:
        return run, device
    return replace(run, trainer={**run.trainer, "precision": device.precision}), device


def recorded_config(cfg: DictConfig, run: RunConfig) -> dict:
    """The config as run.json records it: as composed, the values as the user wrote them (``data.fraction=1/8``,
    not the 0.125 the typed run reads), so that runs of every version pair and resume alike; and the Trainer's
    arguments as this run placed and resolved them."""
    return {**OmegaConf.to_container(without_hydra(cfg), resolve=True), "trainer": dict(run.trainer)}


def in_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def train(cfg: DictConfig, run_dir: str | Path, run: RunConfig | None = None) -> dict:
    """Train the composed ``cfg`` into ``run_dir``; ``run``: ``cfg`` as already parsed and checked (tinygpt-train's
    preflight callback parses it before Hydra writes the job's folder), else parsed here. The typed run is what
    the code below reads; ``cfg`` itself is read once more, only as run.json's record of it."""
    run = run or check_run_config(cfg)  # every value checked before anything is written
    if run.trial is not None and not (HydraConfig.initialized() and in_search(HydraConfig.get())):
        raise ConfigError(f"{TRIAL_KEY}={run.trial}: set by a search's sweeper (-m hparams_search=...), not by hand")
    run = apply_placement(run)  # sweep jobs: the GPU leased to this job; no multi-device jobs (tinygpt/launch)
    run, device = resolve_precision(run)  # trainer.precision=auto: per device, recorded as resolved
    speed = device_speed(run, device.kind)  # each speed switch on this device (tinygpt/train/device_settings.py)
    device_settings.apply(speed)  # TF32, and cuBLAS's deterministic workspace, before any matmul of this run
    # progress: a bar on a terminal, one line every N steps in a log (tinygpt/train/console.py); checked first
    progress = (
        [progress_callback(run.progress.style, run.progress.every_n_steps)]
        if run.trainer.get("enable_progress_bar", True)
        else []
    )
    silence_third_party_tips()
    run_dir = Path(run_dir)
    if rank_zero_only.rank != 0:  # the other ranks of a DDP run: the same run, rank 0 holds its lock
        return _train(cfg, run, run_dir, progress, device, speed)
    try:
        lock = lock_run(run_dir)
    except RunFolderBusy as busy:
        if not in_multirun():
            raise
        # a rerun of a sweep whose job is still running elsewhere (another terminal, a worker being stopped)
        say(f"skipping this job: {busy}")
        return read_record(run_dir) or {"status": "running elsewhere", "run_dir": str(run_dir)}
    with lock:
        return _train(cfg, run, run_dir, progress, device, speed)


def _train(
    cfg: DictConfig, run: RunConfig, run_dir: Path, progress: list, device: DeviceChoice, speed: DeviceSettings
) -> dict:
    previous = read_record(run_dir)
    written = recorded_config(cfg, run)
    # score once: the held-out scoring step(s) and recipe, checked against what a resumed run registered
    registration = check_pre_registration(previous, pre_registration(written))
    if is_finished_and_skipped(previous, run.resume, run.ckpt_path):
        say(
            f"{run_dir} already finished (best dev bpb {previous.get('best', {}).get(DEV_BITS_PER_BYTE)}); "
            "skipping. Use resume=never to train it again."
        )
        return previous
    ckpt_path = resume_path(run_dir, run.resume, run.ckpt_path)
    if run.resume == "never" and checkpoints_dir(run_dir).exists() and not run.ckpt_path:
        raise ConfigError(
            f"resume=never: {checkpoints_dir(run_dir)} already holds checkpoints; pick another output folder "
            "(hydra.run.dir=...) rather than overwrite them, or resume=auto to continue"
        )

    datamodule = build_datamodule(run)
    say(device.why)
    say(speed.line())
    exactness = device_settings.exactness(device.kind, speed.deterministic)
    if exactness:
        say(exactness)
    for line in datamodule.summary_lines():
        say(line)
    config = model_config(run, datamodule.vocab_size)
    optim = run.optim
    resume_step = 0
    if ckpt_path:  # the checkpoint must fit this run before anything in the folder changes
        checkpoint = read_checkpoint(ckpt_path)
        check_resumable(
            checkpoint,
            ckpt_path,
            config,
            optim,
            run.trainer["max_steps"],
            datamodule.tokenizer.to_json(),
        )
        resume_step = int(checkpoint.get("global_step", 0))
        del checkpoint

    module = build_module(run, datamodule, speed)
    n_params = module.model.num_parameters()
    say(f"model: {n_params:,} parameters; run dir: {run_dir}")

    record = RunRecord(
        run_dir,
        {
            "config": written,
            "parameters": n_params,
            "data": datamodule.describe(),
            "run_dir": str(run_dir),
            **({"score_once": registration} if registration else {}),
        },
        session={"device_choice": device.why, "speed": speed.record()},
    )
    # a resumed run continues its CSV and TensorBoard histories from the checkpoint's step (tinygpt/train/logs.py)
    loggers = [
        instantiate(logger, save_dir=str(run_dir), **resume_kwargs(logger["_target_"], resume_step))
        for logger in run.logger.values()
    ]
    callbacks = build_callbacks(run, run_dir, module, datamodule, record) + progress
    trainer = L.Trainer(
        **run.trainer,
        logger=loggers,
        callbacks=callbacks,
        default_root_dir=str(run_dir),
        max_epochs=-1,
        num_sanity_val_steps=0,
        gradient_clip_val=optim.grad_clip,
        plugins=[AtomicCheckpointIO()],
    )
    for logger in loggers:
        if isinstance(logger, TensorBoardLogger) and resume_step:
            continue  # logged by the session that started the run (a second copy would repeat its step-0 metric)
        if isinstance(logger, TensorBoardLogger):  # the hparams tab pairs the switches with this metric
            logger.log_hyperparams(hparams(run, config), metrics={"hp/best_dev_bpb": math.nan})
        else:
            logger.log_hyperparams(hparams(run, config))
    try:
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
        if datamodule.has_dev and (
            not record.record["curve"] or record.record["curve"][-1]["step"] != trainer.global_step
        ):
            # the last step was not a scoring step, or its score was lost to a crash: score it now, and keep
            # last.ckpt's best score in step with the record
            trainer.validate(module, datamodule=datamodule, verbose=False)
            last = next(c for c in trainer.callbacks if isinstance(c, LastCheckpoint))
            last.save(trainer)
    except TrainingInterrupted as stop:
        record.finish("interrupted", error=str(stop), step=trainer.global_step)
        raise
    except BaseException as err:
        record.finish("failed", error=f"{type(err).__name__}: {err}", step=trainer.global_step)
        raise
    sampler = next(c for c in trainer.callbacks if isinstance(c, TextSampler))
    sample = sampler.last_sample or sampler.sample(module)
    pruned = {}
    if run.trial is not None:
        from tinygpt.train.pruning import TrialPruning  # a search's trial (build_callbacks)

        pruning = next(c for c in trainer.callbacks if isinstance(c, TrialPruning))
        pruned = {"pruned": pruning.pruned} if pruning.pruned else {}
    result = record.finish(
        "pruned" if pruned else "finished",
        **pruned,
        step=trainer.global_step,
        sample=sample,
        tokens_per_sec=next(c for c in trainer.callbacks if isinstance(c, SpeedMonitor)).tokens_per_sec,
    )
    report(result, run_dir, loggers)
    return result


def report(result: dict, run_dir: Path, loggers) -> None:
    final, best = result.get("final"), result.get("best")
    say("", prefix=False)
    say("---- done ----")
    if final:
        say(
            f"dev bits per byte at step {final['step']}: {final[DEV_BITS_PER_BYTE]:.4f} "
            f"(best {best[DEV_BITS_PER_BYTE]:.4f} at step {best['step']})"
        )
    if result.get("pruned"):
        say(f"stopped early by the search's pruner at step {result['pruned']['step']} (run.json: status pruned)")
    say(f"sample:\n{result['sample']}\n")
    for logger in loggers:
        say(f"{type(logger).__name__} logs: {logger.log_dir}")
    say(f"checkpoints: {checkpoints_dir(run_dir)}; run record: {record_path(run_dir)}")
    for line in next_steps(run_dir):
        say(line, prefix=False)


def next_steps(run_dir: Path) -> list[str]:
    """Commands for what usually comes next, ready to paste: the run's paths as the shell takes them (a run
    folder's ``=`` and ``,`` need no quotes there, and the programs take a bare path: tinygpt/cli/entry.py)."""
    folder = shown_path(run_dir)
    last = shown_path(last_checkpoint(run_dir))
    lines = [
        "next:",
        f"  tinygpt-evaluate {folder}                 # every checkpoint on the dev split",
        f"  tinygpt-generate {last} prompt='...'",
        f"  tinygpt-export {last} out={shlex.quote(str(Path('outputs') / 'hf' / Path(run_dir).name))}",
        f"  tensorboard --logdir {folder}",
    ]
    if in_multirun():
        lines.insert(1, f"  tinygpt-report {shown_path(Path(run_dir).parent)}   # the sweep's table, once its jobs end")
    return lines


def shown_path(path: Path) -> str:
    """``path`` relative to the current folder when under it, shell-quoted where it must be."""
    path = Path(path).resolve()
    try:
        path = path.relative_to(Path.cwd())
    except ValueError:
        pass
    return shlex.quote(str(path))
