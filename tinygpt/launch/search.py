"""The search's loop: ask Optuna for a batch of trials, launch them as placed tinygpt jobs, tell it what each scored.

``hydra_plugins/tinygpt_search`` is the Hydra Sweeper of ``-m hparams_search=<name>``; its ``sweep`` is
``run_search`` here. Each trial is an ordinary tinygpt job: the sampled values become overrides, the job's folder
is ``<sweep dir>/trial_NNNN`` and it is launched by the configured launcher (placement's by default), so trials
get devices, CPU threads and ``jobs_per_device`` packing like any sweep's jobs, ``n_jobs`` at a time.

What a trial scored is read from its run.json (the objective's field, or ``status: pruned``), not from the
process's return value, so a trial whose job finished before a crash of the search is told from its folder.

Resume. The study and its trials live in ``<sweep dir>/study.db``; a launch holds ``study.lock`` for its whole
run, so two searches never drive one study. A trial still ``RUNNING`` in the study when a launch starts was
left by a search that was killed: its job finished (told from its run.json) or it is launched again with the
same values, in the same folder, where ``resume=auto`` continues its training from ``last.ckpt``. Trials are
counted in every state, so a rerun of a finished search adds none and a killed one adds only the missing ones.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState

from tinygpt.common.run_folder import read_record
from tinygpt.common.say import PREFIX
from tinygpt.launch.leases import try_lock
from tinygpt.launch.search_config import TRIAL_DIR, TRIAL_KEY, SearchRefused, SearchSweeperConf, check_objective
from tinygpt.launch.study import Space, open_study, parse_space, remember_space, trial_of

LOCK_FILE = "study.lock"
DONE = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
PLAIN = re.compile(r"^[A-Za-z0-9_.+\-/]+$")


def say(message: str) -> None:
    """A line of the search's own (the launching process: Hydra's console logging would print a say() twice)."""
    print(PREFIX + message, flush=True)


def override_value(value: Any) -> str:
    """A sampled value as Hydra's override grammar reads it back (floats round-trip through repr)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)) or value is None:
        return "null" if value is None else repr(value)
    text = str(value)
    return text if PLAIN.match(text) else "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def trial_overrides(space: Space, number: int, params: dict) -> list[str]:
    """The job overrides of trial ``number``: the shared ones, its sampled values, its number and folder."""
    sampled = [f"{key}={override_value(params[key])}" for key in space.distributions]
    return [*space.fixed, *sampled, f"{TRIAL_KEY}={number}", f"hydra.sweep.subdir={TRIAL_DIR.format(number=number)}"]


def trial_dir(sweep_dir: str | Path, number: int) -> Path:
    return Path(sweep_dir) / TRIAL_DIR.format(number=number)


def outcome(record: dict | None, objective: str) -> tuple[TrialState, float | None, str]:
    """What a trial's run.json says for the study: (state, value, why)."""
    if not record:
        return TrialState.FAIL, None, "no run.json"
    status = record.get("status")
    if status == "pruned":
        pruned = record.get("pruned") or {}
        return TrialState.PRUNED, None, f"pruned at step {pruned.get('step')}"
    if status != "finished":
        return TrialState.FAIL, None, f"status {status}: {record.get('error', '')}".strip()
    part, _, metric = objective.partition(".")
    value = (record.get(part) or {}).get(metric)
    if value is None:
        return TrialState.FAIL, None, f"run.json has no {objective} (a run without a dev split?)"
    return TrialState.COMPLETE, float(value), f"{objective} {value:.4f}"


def tell(study: optuna.Study, number: int, sweep_dir: Path, objective: str, job: JobReturn | None = None) -> None:
    """Record trial ``number``'s outcome in the study, from its job's return and its run.json."""
    if job is not None and job.status == JobStatus.FAILED:
        try:
            job.return_value  # noqa: B018  (re-raises the job's exception)
        except BaseException as err:  # the job's own error, whatever it was: the trial failed, the search goes on
            reason = f"{type(err).__name__}: {err}".splitlines()[0]
        state, value = TrialState.FAIL, None
    else:
        state, value, reason = outcome(read_record(trial_dir(sweep_dir, number)), objective)
    trial_of(study, number).set_user_attr("outcome", reason)  # the report's "why" of a failed or pruned trial
    frozen = study.tell(number, value if state == TrialState.COMPLETE else None, state=state, skip_if_finished=True)
    say(f"trial {number}: {frozen.state.name.lower()}, {reason}")


def run_search(sweeper_node: DictConfig, config: DictConfig, launcher: Any, arguments: Sequence[str]) -> list:
    """The whole search: refusals first, then the study opened (created or continued) and filled to n_trials."""
    sweeper = OmegaConf.merge(OmegaConf.structured(SearchSweeperConf), sweeper_node)
    check_objective(sweeper.objective, sweeper.direction)
    space = parse_space(dict(sweeper.params or {}), arguments)
    if sweeper.n_trials < 1:
        raise SearchRefused(f"hydra.sweeper.n_trials={sweeper.n_trials}: a positive integer")
    sweep_dir = Path(config.hydra.sweep.dir)
    sweep_dir.mkdir(parents=True, exist_ok=True)
    lock = try_lock(sweep_dir / LOCK_FILE)
    if lock is None:
        raise SearchRefused(f"{sweep_dir}: another search is running on this study ({LOCK_FILE} is held)")
    try:
        OmegaConf.save(config, sweep_dir / "multirun.yaml")
        study = open_study(sweeper, sweep_dir, config.name)
        execution = OmegaConf.select(config, "hydra.job.config.override_dirname.exclude_keys", default=None) or []
        remember_space(study, space, sweeper.objective, list(execution))
        return _fill(study, space, sweeper, config, launcher, sweep_dir)
    finally:
        lock.release()


def batch_size(sweeper: Any, config: DictConfig) -> int:
    if sweeper.n_jobs is not None:
        return max(1, int(sweeper.n_jobs))
    return max(1, int(OmegaConf.select(config, "hydra.launcher.n_jobs", default=1) or 1))


def _fill(study: optuna.Study, space: Space, sweeper: Any, config: DictConfig, launcher: Any, sweep_dir: Path) -> list:
    returns = []
    # trials a killed search left running: told from their folders, or trained on from their checkpoints
    stale = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    relaunch = []
    for frozen in stale:
        record = read_record(trial_dir(sweep_dir, frozen.number))
        if record and record.get("status") in ("finished", "pruned"):
            tell(study, frozen.number, sweep_dir, sweeper.objective)
        else:
            relaunch.append(frozen)
    if relaunch:
        say(f"continuing trial(s) {', '.join(str(t.number) for t in relaunch)} left running by an earlier launch")
        returns.append(_launch(study, space, sweeper, launcher, sweep_dir, [(t.number, t.params) for t in relaunch]))
    size = batch_size(sweeper, config)
    while True:
        done = len(study.get_trials(deepcopy=False, states=DONE))
        left = sweeper.n_trials - done
        if left <= 0:
            break
        asked = [study.ask(space.distributions) for _ in range(min(size, left))]
        say(f"search {study.study_name}: trials {done + 1}-{done + len(asked)} of {sweeper.n_trials}")
        returns.append(_launch(study, space, sweeper, launcher, sweep_dir, [(t.number, t.params) for t in asked]))
    summarize(study, sweep_dir)
    return returns


def _launch(study, space: Space, sweeper, launcher, sweep_dir: Path, trials: list[tuple[int, dict]]) -> list:
    batch = [trial_overrides(space, number, params) for number, params in trials]
    results = launcher.launch(batch, initial_job_idx=trials[0][0])
    for (number, _), job in zip(trials, results, strict=True):
        tell(study, number, sweep_dir, sweeper.objective, job)
    return list(results)


def summarize(study: optuna.Study, sweep_dir: Path) -> None:
    try:
        best = study.best_trial
    except ValueError:
        say(f"search {study.study_name}: no trial finished; see the trials' train.log in {sweep_dir}")
        return
    values = ", ".join(f"{k}={override_value(v)}" for k, v in best.params.items())
    say(
        f"search {study.study_name}: best trial {best.number} ({trial_dir(sweep_dir, best.number).name}), "
        f"{best.value:.4f}: {values}"
    )
    say(f"next: tinygpt-report {sweep_dir}   then   tinygpt-register {sweep_dir} name=<recipe>")
