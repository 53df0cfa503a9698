"""One training run from a composed config: data, model, Trainer, callbacks; resume; the run record.

``train()`` reads top to bottom: the config parsed once (tinygpt/train/preflight.py), placed on a device and
resolved for it (tinygpt/launch/placement.py, tinygpt/train/device_settings.py), then under the run folder's lock
each part built by its own call: the DataModule, the LightningModule, the record and the loggers. The callbacks
are built first, from the config (conf/callbacks/), so that a bad value fails before the folder is touched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import lightning as L
from hydra.core.hydra_config import HydraConfig
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf

from tinygpt.common.run_folder import (
    DEV_BITS_PER_BYTE,
    is_finished_and_skipped,
    read_record,
)
from tinygpt.common.say import say
from tinygpt.data import build_datamodule
from tinygpt.launch.placement import apply_placement, in_multirun
from tinygpt.launch.search_config import TRIAL_KEY, in_search
from tinygpt.train import budget, device_settings
from tinygpt.train.callbacks import build_callbacks
from tinygpt.train.callbacks.last_checkpoint import LastCheckpoint, TrainingInterrupted
from tinygpt.train.callbacks.pruning import TrialPruning
from tinygpt.train.callbacks.sampling import TextSampler
from tinygpt.train.callbacks.throughput import ThroughputMonitor
from tinygpt.train.checkpoints import AtomicCheckpointIO, resume_point
from tinygpt.train.console import silence_third_party_tips
from tinygpt.train.logs import build_loggers
from tinygpt.train.module import build_module
from tinygpt.train.preflight import check_run_config, without_hydra
from tinygpt.train.record import RunRecord
from tinygpt.train.runlock import RunFolderBusy, lock_run
from tinygpt.train.schema import ConfigError, RunConfig
from tinygpt.train.score_once import check_pre_registration, pre_registration
from tinygpt.train.summary import summarize
from tinygpt.train.trackers import finish_trackers


def train(
    cfg: DictConfig,
    run_dir: str | Path,
    run: RunConfig | None = None,
    export_refusal: Callable[[Path], str | None] | None = None,
) -> dict:
    """Train the composed ``cfg`` into ``run_dir``; ``run``: ``cfg`` as already parsed and checked (tinygpt-train's
    preflight callback parses it before Hydra writes the job's folder), else parsed here. The typed run is what
    the code below reads; ``cfg`` itself is read once more, only as run.json's record of it: as composed, the
    values as the user wrote them (``data.fraction=1/8``, not the 0.125 the typed run reads), so that runs of every
    version pair and resume alike, and the Trainer's arguments as this run placed and resolved them.
    ``export_refusal``: what the closing lines ask before naming the export command (tinygpt/train/summary.py)."""
    composed = without_hydra(cfg)
    run = run or check_run_config(composed)  # every value checked before anything is written
    if run.trial is not None and not (HydraConfig.initialized() and in_search(HydraConfig.get())):
        raise ConfigError(f"{TRIAL_KEY}={run.trial}: set by a search's sweeper (-m hparams_search=...), not by hand")
    run = apply_placement(run)  # sweep jobs: the GPU leased to this job; no multi-device jobs (tinygpt/launch)
    # trainer.precision=auto per device, recorded as resolved; each speed switch on this device; TF32 and cuBLAS's
    # deterministic workspace set before any matmul of this run (tinygpt/train/device_settings.py)
    run, device = device_settings.prepare(run)
    run_dir = Path(run_dir)
    # the configured callbacks (conf/callbacks/) and the kept checkpoints: built, so checked, before anything is written
    callbacks = build_callbacks(run, run_dir)
    silence_third_party_tips()
    if rank_zero_only.rank != 0:  # the other ranks of a DDP run: the same run, rank 0 holds its lock
        lock = contextlib.nullcontext()
    else:
        try:
            lock = lock_run(run_dir)
        except RunFolderBusy as busy:
            if not in_multirun():
                raise
            # a rerun of a sweep whose job is still running elsewhere (another terminal, a worker being stopped)
            say(f"skipping this job: {busy}")
            return read_record(run_dir) or {"status": "running elsewhere", "run_dir": str(run_dir)}
    with lock:
        previous = read_record(run_dir)
        # run.json's config, as the user wrote it (the form of tinygpt/common/run_folder.py's config_record)
        written = {**OmegaConf.to_container(composed, resolve=True), "trainer": dict(run.trainer)}
        # score once: the held-out scoring step(s) and recipe, checked against what a resumed run registered
        registration = check_pre_registration(previous, pre_registration(written))
        if is_finished_and_skipped(previous, run.resume, run.ckpt_path):
            say(
                f"{run_dir} already finished (best dev bpb {previous.get('best', {}).get(DEV_BITS_PER_BYTE)}); "
                "skipping. To train it again, give it another folder (hydra.run.dir=..., or hydra.sweep.dir=... "
                f"in a sweep), or delete {run_dir} first."
            )
            return previous
        datamodule = build_datamodule(run.data, run.model.context_length, run.seed)
        for line in device.lines + datamodule.summary_lines():
            say(line)
        # budget.flops: trainer.max_steps from the model's FLOPs per token, known now the vocabulary is
        run, spent = budget.spend(run, datamodule.tokenizer.vocab_size)
        if spent is not None:
            written["trainer"] = dict(run.trainer)
            say(
                f"budget: {spent['flops']:.3g} FLOPs buy {spent['steps']:,} steps of {spent['tokens_per_step']:,} "
                f"tokens at {spent['flops_per_token']:,} FLOPs per token (trainer.max_steps={spent['steps']})"
            )
        module = build_module(run, datamodule.tokenizer, device.speed)
        # the checkpoint it continues from, checked to fit the module, before anything in the folder changes
        ckpt_path, resume_step = resume_point(run_dir, run, module)
        n_params = module.model.num_parameters()
        say(f"model: {n_params:,} parameters; run dir: {run_dir}")

        record = RunRecord(
            run_dir,
            {
                "config": written,
                "parameters": n_params,
                "data": datamodule.describe(),
                "run_dir": str(run_dir),
                **({"budget": spent} if spent else {}),
                **({"score_once": registration} if registration else {}),
            },
            session={"device_choice": device.why, "speed": device.record()},
        )
        # a resumed run continues its CSV and TensorBoard histories from the checkpoint's step (tinygpt/train/logs.py)
        loggers = build_loggers(run, run_dir, resume_step, module.model_config, written)
        trainer = L.Trainer(
            **run.trainer,
            logger=loggers,
            callbacks=[*callbacks, record],
            default_root_dir=str(run_dir),
            max_epochs=-1,
            num_sanity_val_steps=0,
            gradient_clip_val=run.optim.grad_clip,
            plugins=[AtomicCheckpointIO()],
        )
        outcome: dict = {"status": "failed"}
        try:
            trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=True)
            if datamodule.has_dev and (
                not record.record["curve"] or record.record["curve"][-1]["step"] != trainer.global_step
            ):
                # the last step was not a scoring step, or its score was lost to a crash: score it now, and keep
                # last.ckpt's best score in step with the record
                trainer.validate(module, datamodule=datamodule, verbose=False)
                next(c for c in trainer.callbacks if isinstance(c, LastCheckpoint)).save(trainer)
            sampler = next((c for c in trainer.callbacks if isinstance(c, TextSampler)), None)
            speed = next((c for c in trainer.callbacks if isinstance(c, ThroughputMonitor)), None)
            outcome = {
                "status": "finished",
                "sample": sampler.last_sample if sampler else None,
                "tokens_per_sec": speed.tokens_per_sec if speed else None,
            }
            pruning = next((c for c in trainer.callbacks if isinstance(c, TrialPruning)), None)
            if pruning and pruning.pruned:  # a search's trial that its study's pruner stopped
                outcome.update(status="pruned", pruned=pruning.pruned)
        except TrainingInterrupted as stop:
            outcome = {"status": "interrupted", "error": str(stop)}
            raise
        except BaseException as err:
            outcome = {"status": "failed", "error": f"{type(err).__name__}: {err}"}
            raise
        finally:  # the record says how the session ended, whichever way it did; so do the trackers
            result = record.finish(**outcome, step=trainer.global_step)
            finish_trackers(loggers, outcome["status"])
        summarize(result, run_dir, loggers, export_refusal)
        return result
