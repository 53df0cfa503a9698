"""Scoring checkpoints after training: dev, or the held-out test split when explicitly asked, once.

The held-out split is scored at most once per (run, checkpoint), and only at the run's pre-registered steps when
it has some; ``force`` with a ``reason`` allows another scoring, recorded as forced beside the first
(tinygpt/train/score_once.py says what identifies a checkpoint and why). The dev split is scored freely.
"""

from __future__ import annotations

from pathlib import Path

from tinygpt.common.errors import ConfigError, PathError
from tinygpt.common.run_folder import checkpoint_files, checkpoints_dir, read_record, record_path
from tinygpt.common.typed import typed
from tinygpt.data import TextDataModule
from tinygpt.data.config import DataConfig
from tinygpt.data.corpus import recorded_data
from tinygpt.data.errors import DataError
from tinygpt.metrics import score
from tinygpt.train.checkpoints import load_model
from tinygpt.train.score_once import check_request, held_out_scoring, record_scoring
from tinygpt.train.trackers import log_held_out

HELD_OUT_METRICS = {  # score()'s keys -> the names the dev scores have in the loggers (dev/bpb, ...)
    "bits_per_byte": "bpb",
    "loss": "loss",
    "bits_per_token": "bits_per_token",
    "bits_per_char": "bits_per_char",
}


def evaluate(
    run_dir: str | None,
    ckpt: str | None = None,
    split: str = "dev",
    device: str = "cpu",
    force: bool = False,
    reason: str | None = None,
) -> list[dict]:
    check_request(split, force, reason)
    if ckpt:
        checkpoints = [Path(ckpt)]
        run_dir = Path(run_dir) if run_dir else Path(ckpt).resolve().parent.parent
    elif run_dir:
        run_dir = Path(run_dir)
        checkpoints = checkpoint_files(run_dir)
        if not checkpoints:
            raise PathError(
                f"run_dir={run_dir}: no checkpoints under {checkpoints_dir(run_dir)}; give a run's folder (it holds "
                "run.json and checkpoints/)"
            )
    else:
        raise ConfigError("give run_dir=<a run's folder> or ckpt=<a checkpoint file>")
    record = read_record(run_dir)
    if record is None:
        raise PathError(
            f"{record_path(run_dir)} not found: evaluate needs the run's record to rebuild its data splits, so the "
            "checkpoint must sit in its run's checkpoints/ folder (or give run_dir=<its run folder>)"
        )
    data = typed(DataConfig, recorded_data(record), "data", DataError)  # run.json's data, as the run read it
    seed = record["config"]["seed"]
    if split == "dev":
        return _score(run_dir, data, seed, checkpoints, split, device)
    # every check before anything is scored or written, under the run folder's lock (refused while training)
    with held_out_scoring(run_dir, checkpoints, force, reason) as plans:
        rows = _score(run_dir, data, seed, [Path(plan["checkpoint"]) for plan in plans], split, device)
        for row, plan in zip(rows, plans, strict=True):
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
    # the run's tracker runs (wandb, MLflow) get the held-out scores beside its dev curve
    log_held_out(
        run_dir,
        [(row["step"] or 0, {f"test/{name}": row[key] for key, name in HELD_OUT_METRICS.items()}) for row in rows],
    )
    return rows


def _score(run_dir: Path, data: DataConfig, seed: int, checkpoints: list[Path], split: str, device: str) -> list[dict]:
    rows, datamodule = [], None
    for path in checkpoints:
        model, tokenizer, checkpoint = load_model(path)
        if datamodule is None:
            datamodule = TextDataModule(
                data, context_length=model.config.context_length, seed=seed, tokenizer=tokenizer
            )
            datamodule.setup("validate")
            loader = datamodule.val_dataloader() if split == "dev" else datamodule.test_dataloader()
            documents = datamodule.dev_documents if split == "dev" else datamodule.test_documents
        # per-document totals (003's per-post table) when the split has several documents
        result = score(
            model.to(device),
            loader,
            device,
            n_documents=len(documents) if len(documents) > 1 else 0,
            what=f"scoring {path.name} on {split}",
        )
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
