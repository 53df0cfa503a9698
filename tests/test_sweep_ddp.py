"""trainer=ddp on the CPU (2 processes, gloo): a run on 2 devices with batch B/2 each trains like one
process with batch B, and only rank 0 writes the record and the checkpoints."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from batch_log import BatchLog
from conftest import PYTHON, REPO, TINY_RUN
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

STEPS = 20
# Both runs see the same 4 windows per step and average the same gradients; they differ only in the order of
# floating-point sums (an all-reduce of two half-batch gradients), measured at <= 5e-7 over 20 steps.
TOLERANCE = 1e-4


def run(run_dir, *overrides):
    log = [f"+callbacks.batch_log._target_={BatchLog.__module__}.BatchLog", f"+callbacks.batch_log.folder={run_dir}"]
    return subprocess.run(
        [
            PYTHON,
            "scripts/train.py",
            *TINY_RUN,
            "trainer.accelerator=cpu",
            f"trainer.max_steps={STEPS}",
            "trainer.val_check_interval=10",
            "checkpoint.every_n_steps=10",
            *overrides,
            *log,
            f"hydra.run.dir={run_dir}",
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},  # batch_log, for the ranks too
        capture_output=True,
        text=True,
        timeout=600,
    )


def logged(run_dir, tag: str) -> dict[int, float]:
    events = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0}).Reload()
    return {e.step: e.value for e in events.Scalars(tag)}


@pytest.fixture(scope="module")
def runs(small_corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    data = ["data=textfile", f"data.path={small_corpus}"]
    one = run(root / "one", *data, "data.batch_size=4")
    two = run(root / "two", *data, "trainer=ddp", "trainer.devices=2", "data.batch_size=2")
    assert one.returncode == 0, one.stderr[-3000:]
    assert two.returncode == 0, two.stderr[-3000:]
    return root / "one", root / "two", two


def test_two_processes_with_half_batches_train_like_one_with_the_whole_batch(runs):
    one, two, _ = runs
    single, ddp = logged(one, "train/loss"), logged(two, "train/loss")
    assert len(single) == STEPS and sorted(single) == sorted(ddp)
    worst = max(abs(single[step] - ddp[step]) for step in single)
    assert worst < TOLERANCE, f"training losses differ by up to {worst:.2e}"
    # a real change, not two flat lines: the loss falls over the 20 steps
    assert single[max(single)] < single[min(single)] - 0.1


def test_ddp_scores_the_dev_split_as_one_device_does_and_records_once(runs):
    one, two, done = runs
    assert "Starting with 2 processes" in done.stdout + done.stderr
    single, ddp = (json.loads((d / "run.json").read_text()) for d in (one, two))
    assert ddp["status"] == "finished" and ddp["step"] == STEPS
    for a, b in zip(single["curve"], ddp["curve"], strict=True):
        assert a["step"] == b["step"] and abs(a["dev_bits_per_byte"] - b["dev_bits_per_byte"]) < TOLERANCE
        # the ranks shard the dev windows: every token and byte counted once, as on one device
        assert (a["dev_tokens"], a["dev_bytes"]) == (b["dev_tokens"], b["dev_bytes"])
    assert ddp["config"]["trainer"]["strategy"] == "ddp"
    # one record, one set of checkpoints, one TensorBoard log: rank 1 wrote nothing of its own
    rank_1 = ["train_ddp_process_1.log", "windows.rank1.json"]  # its log, and the test's own batch log
    assert sorted(p.name for p in two.iterdir() if not p.name.startswith(".")) == sorted(
        [p.name for p in one.iterdir() if not p.name.startswith(".")] + rank_1
    )
    assert len(list((two / "tb").glob("events.out.tfevents.*"))) == 1
    weights = [torch.load(d / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"] for d in (one, two)]
    for key, value in weights[0].items():
        assert torch.allclose(value, weights[1][key], atol=1e-5), key


def test_the_two_ranks_see_disjoint_windows_that_together_are_the_single_runs_batch(runs):
    """Each gloo rank trains on its own half of the step's global batch (tinygpt/data/batches.py: the B * world
    windows drawn once, rank r taking its slice), logged by a callback added from the config."""
    one, two, _ = runs
    single = json.loads((one / "windows.rank0.json").read_text())
    ranks = [json.loads((two / f"windows.rank{r}.json").read_text()) for r in (0, 1)]
    assert sorted(single, key=int) == [str(s) for s in range(1, STEPS + 1)]
    assert all(rank.keys() == single.keys() for rank in ranks)
    for step, windows in single.items():
        first, second = ranks[0][step], ranks[1][step]
        assert len(first) == len(second) == 2 and len(windows) == 4
        assert not {tuple(w) for w in first} & {tuple(w) for w in second}  # disjoint
        assert first + second == windows  # rank 0 the first half, rank 1 the second
