"""Scoring checkpoints after training: dev, or the held-out test split when explicitly asked, once.

The held-out split is scored at most once per (run, checkpoint), and only at the run's pre-registered steps when
it has some; ``force`` with a ``reason`` allows another scoring, recorded as forced beside the first
(tinygpt/train/score_once.py says what identifies a checkpoint and why). The dev split is scored freely.
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from tinygpt.common.run_folder import checkpoint_files, checkpoints_dir, read_record, record_path
from tinygpt.data import TextDataModule
from tinygpt.metrics import score
from tinygpt.train.checkpoints import load_model
from tinygpt.train.runlock import lock_run
from tinygpt.train.score_once import check_scoring, record_scoring, weights_hash


def evaluate(
    run_dir: str | None,
    ckpt: str | None = None,
    split: str = "dev",
    device: str = "cpu",
    force: bool = False,
    reason: str | None = None,
) -> list[dict]:
    if split not in ("dev", "test"):
        raise ValueError(f"split={split!r} is not allowed; choose dev or test")
    if split == "dev" and (force or reason):
        raise ValueError("force= and reason= apply to split=test only (the dev split is scored freely)")
    if ckpt:
        checkpoints = [Path(ckpt)]
        run_dir = Path(run_dir) if run_dir else Path(ckpt).resolve().parent.parent
    elif run_dir:
        run_dir = Path(run_dir)
        checkpoints = checkpoint_files(run_dir)
        if not checkpoints:
            raise FileNotFoundError(f"no checkpoints under {checkpoints_dir(run_dir)}")
    else:
        raise ValueError("give run_dir=<a run's folder> or ckpt=<a checkpoint file>")
    record = read_record(run_dir)
    if record is None:
        raise FileNotFoundError(
            f"{record_path(run_dir)} not found: evaluate needs the run's record to rebuild its data splits"
        )
    cfg = OmegaConf.create(record["config"])
    # scoring the test split appends to the run's record: take the run folder's lock (refused while training)
    lock = lock_run(run_dir) if split == "test" else None
    try:
        plans = None
        if split == "test":  # every check before anything is scored or written
            plans = _plan(checkpoints)
            check_scoring(run_dir, plans, (record.get("score_once") or {}).get("steps"), force, reason)
            checkpoints = [Path(plan["checkpoint"]) for plan in plans]
        rows = _score(run_dir, cfg, checkpoints, split, device)
        for row, plan in zip(rows, plans or [], strict=False):
            record_scoring(
                run_dir,
                {
                    **row,
                    "weights_sha256": plan["weights_sha256"],
                    "forced": bool(force),
                    "reason": reason if force else None,
                    "source": "evaluate",
                },
            )
        return rows
    finally:
        if lock is not None:
            lock.release()


def _score(run_dir: Path, cfg, checkpoints: list[Path], split: str, device: str) -> list[dict]:
    rows, datamodule = [], None
    for path in checkpoints:
        model, tokenizer, checkpoint = load_model(path)
        if datamodule is None:
            datamodule = TextDataModule(
                cfg.data, context_length=model.config.context_length, seed=cfg.seed, tokenizer=tokenizer
            )
            datamodule.setup("validate")
            loader = datamodule.val_dataloader() if split == "dev" else datamodule.test_dataloader()
            documents = datamodule.dev_documents if split == "dev" else datamodule.test_documents
        # per-document totals (003's per-post table) when the split has several documents
        result = score(model.to(device), loader, device, n_documents=len(documents) if len(documents) > 1 else 0)
        row = {
            "checkpoint": str(path),
            "step": checkpoint.get("global_step"),
            "split": split,
            **{k: v for k, v in result.items() if not isinstance(v, list)},
        }
        if "per_document_bits" in result:
            per_document = zip(documents, result["per_document_bits"], result["per_document_bytes"], strict=True)
            row["per_document_bpb"] = {name: bits / n_bytes for name, bits, n_bytes in per_document}
        rows.append(row)
    return rows


def _plan(checkpoints: list[Path]) -> list[dict]:
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
