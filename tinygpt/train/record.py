"""The run record: ``run.json`` in the job's directory, a small machine-readable summary for the report
tool (resolved config, parameter count, data splits, the validation curve, best and final metrics,
status; a pre-registered held-out scoring, ``score_once``, and the list of held-out scorings made, without
their scores, ``held_out_scorings``: tinygpt/train/score_once.py; what produced it, ``provenance``, one entry per
training session: tinygpt/train/provenance.py). Written atomically at start (before the first training step), at
every validation and at the end."""

from __future__ import annotations

import time
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.utilities import rank_zero_only

from tinygpt.common.files import write_json_atomic
from tinygpt.common.run_folder import DEV, DEV_BITS_PER_BYTE, DEV_LOSS, read_record, record_path
from tinygpt.common.say import say
from tinygpt.train import provenance


class RunRecord(L.Callback):
    def __init__(self, run_dir: Path, header: dict, session: dict | None = None):
        """session: what this training session adds to its provenance entry (the device choice, the speed
        switches as resolved there: tinygpt/train/device_settings.py)."""
        self.run_dir = Path(run_dir)
        self.path = record_path(run_dir)
        previous = read_record(run_dir) or {}
        self.record = {
            **header,
            "status": "running",
            "curve": previous.get("curve", []),
            "wall_time_s": previous.get("wall_time_s", 0.0),
        }
        if previous.get("held_out_scorings"):  # the score-once ledger survives a resume (tinygpt/train/score_once.py)
            self.record["held_out_scorings"] = previous["held_out_scorings"]
        self.record["provenance"] = list(previous.get("provenance") or [])  # earlier sessions', then this one's
        self._started = time.time()
        self._session: dict | None = None  # this session's provenance, from on_train_start
        self._peak: dict = {}
        self._session_extra = dict(session or {})
        self._wall_before = self.record["wall_time_s"]

    def on_train_start(self, trainer, pl_module):
        # (after the checkpoint is restored) a resumed run drops curve points past the checkpoint it resumed from
        self.record["curve"] = [p for p in self.record["curve"] if p["step"] <= trainer.global_step]
        self._set_best()
        self.record["resumed_from_step"] = trainer.global_step or None
        if trainer.global_step:
            say(f"resumed from step {trainer.global_step}: the run continues from its checkpoint")
        sessions = [s for s in self.record["provenance"] if s.get("from_step", 0) < trainer.global_step]
        self._session = provenance.collect(pl_module.device, str(trainer.precision), trainer.global_step)
        self._session.update({**self._session_extra, **self._peak})
        self.record["provenance"] = [*sessions, self._session]
        self._write()

    def note_peak(self, flops: float, source: str) -> None:
        """The matmul peak that this session's MFU divides by (measured, or speed.peak_flops), into its provenance;
        the speed monitor may tell it before or after this callback's on_train_start."""
        self._peak = {"matmul_peak_flops": flops, "matmul_peak_source": source}
        if self._session is not None:
            self._session.update(self._peak)
            self._write()

    def on_validation_end(self, trainer, pl_module):
        if trainer.sanity_checking:
            return
        point = {"step": trainer.global_step, **{DEV + k: v for k, v in pl_module.last_dev_score.items()}}
        train_loss = trainer.callback_metrics.get("train/loss")
        if train_loss is not None:
            point["train_loss"] = float(train_loss)
        self.record["curve"] = [p for p in self.record["curve"] if p["step"] != point["step"]] + [point]
        self._set_best()
        self._write()

    def _set_best(self) -> None:
        """``best``: the curve's lowest dev bits per byte (its step) and lowest dev loss."""
        if not self.record["curve"]:
            self.record.pop("best", None)
            return
        best = min(self.record["curve"], key=lambda p: p[DEV_BITS_PER_BYTE])
        self.record["best"] = {
            "step": best["step"],
            DEV_BITS_PER_BYTE: best[DEV_BITS_PER_BYTE],
            DEV_LOSS: min(p[DEV_LOSS] for p in self.record["curve"]),
        }

    def on_train_end(self, trainer, pl_module):
        # a CUDA session's allocator peak, beside the footprint that sweep.jobs_per_device=auto estimated for it
        # (tinygpt/launch/footprint.py): the figure that checks the estimate on a GPU
        if pl_module.device.type == "cuda" and self._session is not None:
            self._session["peak_memory_reserved_bytes"] = torch.cuda.max_memory_reserved(pl_module.device)
            self._write()

    def update(self, **fields) -> None:
        """Add or replace top-level fields (e.g. a callback's measurements) and write the record."""
        self.record.update(fields)
        self._write()

    def finish(self, status: str, **extra) -> dict:
        """The session's end: ``status`` (finished, pruned, interrupted, failed) and what it adds (its step, sample,
        speed, or error), written."""
        self.record.update(status=status, **extra)
        self._set_best()  # a session that resumed at its last step has validated nothing (Lightning starts no training)
        if self.record["curve"]:
            self.record["final"] = self.record["curve"][-1]
        self._write()
        return self.record

    def _write(self) -> None:
        if rank_zero_only.rank != 0:  # under DDP every process runs the callbacks; one writes the record
            return
        self.record["wall_time_s"] = self._wall_before + time.time() - self._started
        write_json_atomic(self.path, self.record)  # a crash mid-write leaves the previous record whole


def run_record(trainer: L.Trainer) -> RunRecord | None:
    """The run's record among the Trainer's callbacks, for the callbacks that add to it (the speed monitor's peak,
    the collapse diagnostics); None for a Trainer built without one (a notebook's)."""
    return next((c for c in trainer.callbacks if isinstance(c, RunRecord)), None)
