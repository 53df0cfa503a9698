"""The run folder: every file name in it, the run record's metric fields, and the one reader and writer of
``run.json`` and ``evaluations.jsonl``.

A run folder is written by training (run.json, checkpoints/, tb/, csv/, run.lock), by placement
(placement.json), by evaluation, baselines and analyses (evaluations.jsonl, appended), and read by the sweep
report, the exporter's model card, evaluation and the analyses. Spelling the layout here once means a renamed
file or field changes in one place, and old run folders keep reading: ``read_record`` is the one place that
accepts a field's older name (``OLD_FIELDS``). It sits in the bottom layer because placement (tinygpt/launch)
writes into the folder too, below training.

One name per metric: a score is named as ``BitsPerByte.compute`` names it (``bits_per_byte``, ``loss``,
``bits_per_token``, ``bits_per_char``); in run.json, which holds the dev split only, it is prefixed ``dev_``
(``dev_bits_per_byte``) in the curve, in ``best`` and in ``final`` alike; an evaluations.jsonl row names its
split in ``split`` and keeps the bare name.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from tinygpt.common.files import write_json_atomic

DONE = ("finished", "pruned")  # run.json statuses of a run that trains no further (pruned: by its search)
RUN_RECORD = "run.json"  # the run record: config, data splits, curve, best, final, status
EVALUATIONS = "evaluations.jsonl"  # one JSON line per scoring after training (evaluate, baselines, analyses)
CHECKPOINTS = "checkpoints"  # folder: last.ckpt and the kept checkpoints
LAST_CHECKPOINT = "last.ckpt"  # the full training state, for resume
KEPT_CHECKPOINT = "step{step:06d}"  # ModelCheckpoint's filename template for kept (weights-only) checkpoints
IMPORTED_CHECKPOINT = "imported.ckpt"  # a model imported from Hugging Face (tinygpt/export/import_hf.py)
RUN_LOCK = "run.lock"  # one writer per folder (tinygpt/train/runlock.py)
LM_EVAL = "lm_eval"  # folder: lm-evaluation-harness results, one <task>.json each (tinygpt/analysis/harness.py)
PLACEMENT = "placement.json"  # the device a sweep job leased (tinygpt/launch/placement.py)
TENSORBOARD_DIR = "tb"  # conf/logger/tensorboard.yaml's name
CSV_DIR = "csv"  # conf/logger/csv.yaml's name; the file inside is Lightning's
CSV_METRICS = "metrics.csv"
TRAIN_LOG = (
    "train.log"  # the console lines with their time: Hydra's job log of tinygpt-train, or the API's (common/say.py)
)

BITS_PER_BYTE = "bits_per_byte"  # the headline metric, as BitsPerByte.compute and evaluations.jsonl name it
DEV = "dev_"  # run.json's prefix: its curve, best and final are dev scores
DEV_BITS_PER_BYTE = DEV + BITS_PER_BYTE
DEV_LOSS = DEV + "loss"

# older field names still read from run folders written before the rename: {section: {old: new}}
OLD_FIELDS = {"best": {"dev_bpb": DEV_BITS_PER_BYTE}}


def record_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / RUN_RECORD


def evaluations_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / EVALUATIONS


def checkpoints_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / CHECKPOINTS


def last_checkpoint(run_dir: str | Path) -> Path:
    return checkpoints_dir(run_dir) / LAST_CHECKPOINT


def lock_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / RUN_LOCK


def placement_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / PLACEMENT


def checkpoint_files(run_dir: str | Path) -> list[Path]:
    """Kept checkpoints in step order (their names sort by step), then last.ckpt."""
    folder = checkpoints_dir(run_dir)
    kept = sorted(p for p in folder.glob("*.ckpt") if p.name != LAST_CHECKPOINT)
    last = folder / LAST_CHECKPOINT
    return kept + ([last] if last.exists() else [])


def read_record(run_dir: str | Path) -> dict | None:
    """The run's record, None when it has none; fields under an older name (``OLD_FIELDS``) read as today's."""
    path = record_path(run_dir)
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    for section, renames in OLD_FIELDS.items():
        fields = record.get(section)
        if isinstance(fields, dict):
            for old, new in renames.items():
                if old in fields:
                    fields.setdefault(new, fields.pop(old))
    return record


def is_finished_and_skipped(record: dict | None, resume: str, ckpt_path: str | None) -> bool:
    """Whether a job with this ``record`` (``read_record``) is skipped instead of trained: it finished (or its
    search stopped it early), and
    ``resume=auto`` without an explicit ``ckpt_path``. One rule for both who ask: training, which returns
    the old record, and placement, which must then neither lease a device nor rewrite placement.json (the
    file says where the job trained, not where a later rerun passed it by)."""
    return resume == "auto" and not ckpt_path and bool(record) and record.get("status") in DONE


def config_record(config: Any) -> Any:
    """A composed config as a record holds it: resolved, as plain dicts and lists (a baseline's data, an imported
    model's run config, a registered recipe), as ``train()`` writes run.json's; what compares a config with records
    (the report's defaults, tinygpt-register's check) takes this same form. Anything else is returned as is."""
    return OmegaConf.to_container(config, resolve=True) if OmegaConf.is_config(config) else config


def write_record(run_dir: str | Path, record: dict) -> None:
    write_json_atomic(record_path(run_dir), record)


def now() -> str:
    """The time stamp of evaluations.jsonl rows and baseline records."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def append_evaluations(run_dir: str | Path, rows: list[dict], stamp: str | None = None) -> None:
    """Add scorings to evaluations.jsonl, each stamped ``time`` (one stamp for rows of one scoring). The file is
    append-only: a later scoring of the same checkpoint adds a line, and the readers take the latest."""
    stamp = stamp or now()
    with open(evaluations_path(run_dir), "a") as log:
        for row in rows:
            log.write(json.dumps({"time": stamp, **row}) + "\n")


def read_evaluations(run_dir: str | Path) -> list[dict]:
    """Every line of evaluations.jsonl, oldest first; [] without one."""
    path = evaluations_path(run_dir)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
