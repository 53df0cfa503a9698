"""A whole sweep's held-out split scored once, in one call: every finished job at its pre-registered step(s).

003's protocol, for a sweep: each run pre-registered the step(s) at which its held-out text will be read
(``score_once.steps``, in run.json before training); once every run is trained, each is scored at those steps,
once. Doing that job by job means one ``evaluate`` per job folder, each folder (which holds ``=`` and ``,``)
quoted inside a Hydra override; this takes the sweep's folder and finds its jobs the way the report does
(tinygpt/report/jobs.py).

Every scoring goes through ``tinygpt.train.evaluate`` and so through the score-once ledger (the run folder's lock,
the step and weights-hash checks, evaluations.jsonl and run.json's list). Before anything is scored, each job is
sorted into one of:
- to score: finished, pre-registered, with a checkpoint at each registered step not yet scored;
- already scored: every registered step is in its ledger (listed with when, and skipped: score once);
- refused: not finished (its model at the registered step may not exist yet, and a run still training holds its
  folder's lock), nothing pre-registered (the protocol needs the step fixed before training: score it on its own
  with ``evaluate run_dir=...``), or no checkpoint at a registered step. Refused jobs are listed, never scored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tinygpt.common.errors import PathError
from tinygpt.common.run_folder import KEPT_CHECKPOINT, checkpoints_dir, last_checkpoint
from tinygpt.report.jobs import FINISHED, Job, load_sweep
from tinygpt.train.evaluate import evaluate
from tinygpt.train.score_once import ledger


@dataclass
class SweepPlan:
    to_score: list[tuple[Job, list[Path]]] = field(default_factory=list)  # each job's checkpoints to score
    already: list[tuple[Job, str]] = field(default_factory=list)  # (job, when and at which steps)
    refused: list[tuple[Job, str]] = field(default_factory=list)  # (job, why)


def checkpoint_at(job: Job, step: int) -> Path | None:
    """The run's checkpoint at ``step``: the kept one of that step, else last.ckpt when the run ended there."""
    kept = checkpoints_dir(job.path) / f"{KEPT_CHECKPOINT.format(step=step)}.ckpt"
    if kept.exists():
        return kept
    last = last_checkpoint(job.path)
    if last.exists() and (job.record or {}).get("step") == step:
        return last
    return None


def plan_sweep(sweep_dir: str | Path) -> tuple[list[Job], SweepPlan]:
    """The sweep's jobs and what to do with each, from run.json and the ledgers alone (nothing is scored)."""
    jobs = load_sweep(sweep_dir)
    if not jobs:
        raise PathError(f"sweep_dir={sweep_dir} holds no sweep jobs (no multirun.yaml, no */.hydra/overrides.yaml)")
    plan = SweepPlan()
    for job in jobs:
        if job.status != FINISHED:
            plan.refused.append((job, f"not finished ({job.status}): train it to the end first"))
            continue
        registered = sorted(((job.record or {}).get("score_once") or {}).get("steps") or [])
        if not registered:
            plan.refused.append(
                (
                    job,
                    "no pre-registered scoring step (score_once.steps in run.json): score it on its own with "
                    "evaluate run_dir=<its folder> split=test",
                )
            )
            continue
        earlier = {row["step"]: row for row in ledger(job.path)}
        steps = [s for s in registered if s not in earlier]
        if not steps:
            when = ", ".join(f"step {s:,} on {earlier[s].get('time', 'an unrecorded time')}" for s in registered)
            plan.already.append((job, when))
            continue
        checkpoints = {step: checkpoint_at(job, step) for step in steps}
        missing = [step for step, path in checkpoints.items() if path is None]
        if missing:
            plan.refused.append(
                (job, f"no checkpoint at the pre-registered step(s) {missing} under {checkpoints_dir(job.path)}")
            )
            continue
        plan.to_score.append((job, list(checkpoints.values())))
    return jobs, plan


def score_planned(plan: SweepPlan, device: str = "cpu", echo=print) -> list[dict]:
    """Score every checkpoint the plan admits, each through the score-once ledger; the rows evaluate returns."""
    rows = []
    for job, checkpoints in plan.to_score:
        for path in checkpoints:
            for row in evaluate(str(job.path), ckpt=str(path), split="test", device=device):
                echo(f"[tinygpt] {job.name}: step {row['step']:,} held-out bits per byte {row['bits_per_byte']:.4f}")
                rows.append(row)
    return rows
