"""Score once: a run's pre-registered held-out scoring, and the ledger that refuses a second scoring.

003's protocol makes every choice on the dev slice and reads the held-out documents once, at a step fixed in
advance; a second look at the held-out score is a second chance to choose, so it must be visible, never silent.

Pre-registration (``score_once.steps``, ``score_once.recipe``, ``score_once.seeds`` in conf/train.yaml): the steps
at which the held-out split will be scored, the seeds that will be scored (a run of another seed is refused), and
the recipe (a name, and the run's resolved switches: its config less the keys
that only say where or how the run is executed, ``NOT_RECIPE``) are written into ``run.json`` by the run record
before the first training step. A resumed run must bring the same pre-registration: a changed step list, name or
switch is refused in one line naming the field, and one cannot be added to a run that has trained without it
(its steps would be chosen after seeing the dev curve).

The ledger: every held-out scoring of a run is appended to ``<run>/evaluations.jsonl`` (the scores) and listed in
``run.json``'s ``held_out_scorings`` (time, checkpoint, step, weights hash, forced, reason; no score, so the sweep
report can say how many exist without reading one). What identifies a "(run, checkpoint)": the run folder
(ledgers are per run), and in it the checkpoint's **step** and the **sha256 of its weights** (the model's
tensors, by name, dtype, shape and bytes; not the file's bytes). Either matching an earlier scoring is the same
checkpoint: the weights hash catches a copied or renamed file and ``last.ckpt`` holding the same weights as
``step004000.ckpt`` (two files, one model); the step catches a re-saved or re-trained copy of the run at that
step (the run's model at step S is what the protocol scores once). Hashing the weights costs one pass over
them, cheap beside the scoring it guards (docs/benchmarks/README.md).
A checkpoint copied into *another* run's folder is not caught: ledgers do not see each other.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import torch

from tinygpt.common.errors import ConfigError
from tinygpt.common.run_folder import append_evaluations, now, read_evaluations, read_record, write_record
from tinygpt.train.checkpoints import load_model
from tinygpt.train.runlock import lock_run

# config keys (prefixes) that say where or how a run executes, not what it trains: outside the recipe
NOT_RECIPE = (
    "name",
    "resume",
    "ckpt_path",
    "progress",
    "sweep",
    "speed",
    "sample",
    "logger",
    "callbacks",
    "score_once",
    "data.root",
    "data.num_proc",
    "trainer.devices",
    "trainer.accelerator",
    "trainer.enable_progress_bar",
    "trainer.log_every_n_steps",
    "trainer.deterministic",
    "checkpoint.every_n_steps",
)


class AlreadyScored(RuntimeError):
    """A held-out scoring the score-once protocol refuses; raised before anything is written."""


def flatten(node: Mapping, prefix: str = "") -> dict:
    out = {}
    for key, value in node.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def recipe_switches(config: Mapping) -> dict:
    """The resolved config as dotted keys, less the execution-only keys (``NOT_RECIPE``)."""
    return {k: v for k, v in flatten(config).items() if not any(k == p or k.startswith(p + ".") for p in NOT_RECIPE)}


def check_score_once(steps: list, recipe: str | None, seeds: list, seed: int, max_steps: int, keep: int | None) -> None:
    """The pre-registration's own checks (``score_once.*`` against the run's seed, ``trainer.max_steps`` and
    ``checkpoint.keep_every_n_steps``): raises ConfigError naming the field. Called where a run's config is
    parsed (tinygpt/train/preflight.py), before anything is written."""
    if not steps:
        if recipe:
            raise ConfigError(
                f"score_once.recipe={recipe!r} is given without score_once.steps: pre-register the "
                "held-out scoring step(s) too, e.g. score_once.steps=[4000]"
            )
        return
    for step in steps:
        if not (isinstance(step, int) and not isinstance(step, bool) and 0 < step <= max_steps):
            raise ConfigError(
                f"score_once.steps={steps} is not allowed: each must be an integer in "
                f"[1, trainer.max_steps={max_steps}]"
            )
        if step != max_steps and not (keep and step % keep == 0):
            raise ConfigError(
                f"score_once.steps: step {step} will have no checkpoint to score (checkpoint."
                f"keep_every_n_steps={keep} keeps none there; only steps it divides, and the last)"
            )
    if len(set(steps)) != len(steps):
        raise ConfigError(f"score_once.steps={steps} is not allowed: a step is listed twice")
    if seeds and seed not in seeds:
        raise ConfigError(
            f"seed={seed} is not one of the recipe's pre-registered score_once.seeds={seeds}: the "
            "seeds to score are fixed with the recipe, so another seed cannot be tried and kept"
        )


def pre_registration(config: Mapping) -> dict | None:
    """What run.json records under ``score_once`` for a run's recorded config (the plain dict run.json keeps),
    or None when it pre-registers nothing; checked first (``check_score_once``)."""
    node = config.get("score_once") or {}
    steps, recipe, seeds = list(node.get("steps") or []), node.get("recipe"), list(node.get("seeds") or [])
    keep = (config.get("checkpoint") or {}).get("keep_every_n_steps")
    check_score_once(steps, recipe, seeds, config.get("seed"), config["trainer"]["max_steps"], keep)
    if not steps:
        return None
    registration = {"steps": sorted(steps), "recipe": recipe, "switches": recipe_switches(config)}
    return {**registration, **({"seeds": seeds} if seeds else {}), "registered_at": now()}


def check_pre_registration(previous: Mapping | None, registration: dict | None) -> dict | None:
    """The registration to record for a run whose earlier record is ``previous`` (None: a new run). Raises
    ConfigError naming the field when a resumed run changes, drops or adds its pre-registration."""
    if not previous:
        return registration
    before = previous.get("score_once")
    started = bool(previous.get("curve")) or previous.get("step")
    if before is None:
        if registration is not None and started:
            raise ConfigError(
                f"score_once.steps={registration['steps']}: this run trained without a pre-registered "
                f"scoring step (run.json in {previous.get('run_dir', 'its folder')}); steps chosen now "
                "are not pre-registered. Start a new run with them"
            )
        return registration
    if registration is None:
        raise ConfigError(
            f"score_once.steps: this run pre-registered steps {before['steps']} on "
            f"{before['registered_at']}; resume it with score_once.steps={before['steps']}"
        )
    for field in ("steps", "recipe", "seeds"):
        if before.get(field) != registration.get(field):
            raise ConfigError(
                f"score_once.{field}={registration.get(field)!r} differs from the pre-registered "
                f"{before.get(field)!r} (run.json, {before['registered_at']}); resume with the registered "
                "value, or start a new run"
            )
    old, new = before["switches"], registration["switches"]
    for key in sorted(set(old) | set(new)):
        if old.get(key, "<unset>") != new.get(key, "<unset>"):
            raise ConfigError(
                f"{key}={new.get(key, '<unset>')!r} differs from the pre-registered recipe's "
                f"{old.get(key, '<unset>')!r} (score_once in run.json, {before['registered_at']}); "
                "resume with the registered recipe, or start a new run"
            )
    return {**registration, "registered_at": before["registered_at"]}


def weights_hash(model: torch.nn.Module) -> str:
    """sha256 over the model's tensors in name order (name, dtype, shape, bytes): the same for every file that
    holds these weights, whatever its name, path or other contents (optimizer state, callbacks)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def ledger(run_dir: Path) -> list[dict]:
    """The run's earlier held-out scorings of its own checkpoints (evaluations.jsonl rows with split=test and a
    step; the baselines' rows name no step)."""
    return [r for r in read_evaluations(run_dir) if r.get("split") == "test" and r.get("step") is not None]


def check_scoring(
    run_dir: Path, planned: list[dict], registered_steps: list[int] | None, force: bool, reason: str | None
) -> None:
    """Refuse, before anything is written, a held-out scoring of a checkpoint this run already scored or (with
    pre-registered steps) one at another step, unless forced with a reason. ``planned``: one dict per checkpoint
    with its ``checkpoint`` path, ``step`` and ``weights_sha256``."""
    if force and not (reason and str(reason).strip()):
        raise ConfigError('force=true needs a non-empty reason="..." (it is recorded with the scoring)')
    if not force and reason:
        raise ConfigError(
            f"reason={reason!r} is given without force=true: a reason is only recorded with a forced scoring"
        )
    if force:
        return
    earlier = ledger(run_dir)
    for plan in planned:
        for row in earlier:
            if row.get("weights_sha256") == plan["weights_sha256"] or row["step"] == plan["step"]:
                same = "the same weights" if row.get("weights_sha256") == plan["weights_sha256"] else "the same step"
                raise AlreadyScored(
                    f"run {run_dir}: checkpoint {plan['checkpoint']} (step {plan['step']}) was already scored on the "
                    f"held-out split at {row.get('time', 'an unrecorded time')} ({same} as {row.get('checkpoint')}); "
                    'score once: a second scoring needs force=true reason="..."'
                )
        if registered_steps and plan["step"] not in registered_steps:
            raise AlreadyScored(
                f"run {run_dir}: checkpoint {plan['checkpoint']} is at step {plan['step']}, not a pre-registered "
                f"scoring step {registered_steps} (score_once in run.json); pick that step's checkpoint, or "
                'force=true reason="..."'
            )


def check_request(split: str, force: bool, reason: str | None, what: str = "scored") -> None:
    """The checks every scoring tool makes on its arguments before reading anything: a known split, and
    force/reason only where there is a ledger to override (the held-out split)."""
    if split not in ("dev", "test"):
        raise ConfigError(f"split={split!r} is not allowed; choose dev or test")
    if split == "dev" and (force or reason):
        raise ConfigError(f"force= and reason= apply to split=test only (the dev split is {what} freely)")


def plan_scorings(checkpoints: list[Path]) -> list[dict]:
    """Each checkpoint's step and weights hash; a file holding the same weights as one before it (last.ckpt at a
    kept step) is dropped: it is the same checkpoint, scored once."""
    plans, seen = [], set()
    for path in checkpoints:
        model, _, checkpoint = load_model(path)
        digest = weights_hash(model)
        if digest not in seen:
            seen.add(digest)
            plans.append({"checkpoint": str(path), "step": checkpoint.get("global_step"), "weights_sha256": digest})
    return plans


@contextmanager
def held_out_scoring(
    run_dir: Path,
    checkpoints: list[Path],
    force: bool = False,
    reason: str | None = None,
    registered_only: bool = False,
    echo=print,
) -> Iterator[list[dict]]:
    """Every tool that scores a run's checkpoints on the held-out split goes through here (evaluate.py, analyze.py,
    baselines.py's LSTM line): the run folder's lock is taken (refused while the run trains), each checkpoint is
    planned (step, weights hash) and checked against the ledger and the pre-registered steps before anything is
    scored, and the plans are yielded for the caller to score and ``record_scoring``. ``registered_only``: when
    the run pre-registered steps, score only the checkpoints at those steps (analyze.py's table would otherwise
    read the held-out text once per kept checkpoint) and say which were left out."""
    lock = lock_run(run_dir)
    try:
        record = read_record(run_dir) or {}
        registered = (record.get("score_once") or {}).get("steps")
        plans = plan_scorings(checkpoints)
        if registered_only and registered and not force:
            left_out = [p for p in plans if p["step"] not in registered]
            plans = [p for p in plans if p["step"] in registered]
            if not plans:
                raise AlreadyScored(
                    f"run {run_dir}: no checkpoint at the pre-registered scoring steps {registered} (score_once in "
                    'run.json); train to that step first, or force=true reason="..."'
                )
            if left_out:
                echo(
                    f"[tinygpt] held-out: scoring the pre-registered step(s) {registered} only; left out "
                    + ", ".join(f"step {p['step']}" for p in left_out)
                )
        check_scoring(run_dir, plans, registered, force, reason)
        yield plans
    finally:
        lock.release()


def record_scoring(run_dir: Path, row: dict, stamp: str | None = None) -> None:
    """Append one held-out scoring to evaluations.jsonl (with its score) and to run.json's held_out_scorings
    (without it), both stamped with the same time. The caller holds the run folder's lock."""
    row = {"time": stamp or now(), **row}
    append_evaluations(run_dir, [row])
    record = read_record(run_dir)
    if record is not None:
        entry = {k: row.get(k) for k in ("time", "checkpoint", "step", "weights_sha256", "forced", "reason", "source")}
        record["held_out_scorings"] = [*record.get("held_out_scorings", []), entry]
        write_record(run_dir, record)
