"""One writer per run folder, every setting validated before anything is written, last.ckpt where the state is
whole (after a scoring step's validation, at the end, on Ctrl-C / SIGTERM), logs that continue across resume,
and checkpoints checked against the run they are loaded into."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import PYTHON, REPO
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tinygpt.common.run_folder import RUN_LOCK as LOCK_NAME
from tinygpt.train.callbacks.last_checkpoint import TrainingInterrupted
from tinygpt.train.checkpoints import CheckpointError, check_resumable
from tinygpt.train.module import GPTModule
from tinygpt.train.run import train
from tinygpt.train.runlock import RunFolderBusy, lock_run
from tinygpt.train.schema import ConfigError


def tb_scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    """(step, value) of a tag as TensorBoard shows it: all event files of the folder, purges applied."""
    events = EventAccumulator(str(run_dir / "tb"), size_guidance={"scalars": 0}).Reload()
    return [(e.step, e.value) for e in events.Scalars(tag)]


def csv_rows(run_dir: Path) -> list[dict]:
    with open(run_dir / "csv" / "metrics.csv", newline="") as file:
        return list(csv.DictReader(file))


def column(rows: list[dict], key: str) -> list[tuple[int, float]]:
    return [(int(row["step"]), float(row[key])) for row in rows if row.get(key)]


# -- one writer per run folder ---------------------------------------------------------------------------------


def test_a_second_writer_is_refused_naming_the_holder_and_a_dead_holders_lock_is_taken_over(tiny_cfg, tmp_path):
    holder = subprocess.Popen(
        [
            PYTHON,
            "-c",
            "import sys, time; from tinygpt.train.runlock import lock_run; "
            "lock = lock_run(sys.argv[1]); print('held', flush=True); time.sleep(600)",
            str(tmp_path),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunFolderBusy) as busy:
            train(tiny_cfg(), tmp_path)
        message = str(busy.value)
        assert f"process {holder.pid}" in message and str(tmp_path) in message and "\n" not in message
        assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_NAME]  # nothing else written
    finally:
        holder.kill()  # kill -9: the lock file stays, naming a dead process
        holder.wait()
    record = train(tiny_cfg(), tmp_path)
    assert record["status"] == "finished"
    assert (tmp_path / LOCK_NAME).read_text().split()[0] == str(os.getpid())


def test_evaluate_test_split_waits_for_no_one_and_refuses_while_the_run_is_being_written(tiny_cfg, tmp_path):
    from tinygpt.common.run_folder import EVALUATIONS
    from tinygpt.train.evaluate import evaluate

    train(tiny_cfg("data.test_fraction=0.1"), tmp_path)
    with lock_run(tmp_path), pytest.raises(RunFolderBusy, match=f"process {os.getpid()}"):
        evaluate(str(tmp_path), split="test")
    assert not (tmp_path / EVALUATIONS).exists()
    # free again: scored and recorded (steps 4 and 8; last.ckpt holds step 8's weights, scored once)
    assert len(evaluate(str(tmp_path), split="test")) == 2


def test_two_identical_command_line_runs_the_second_refuses_in_one_line(small_corpus, tmp_path):
    command = [
        PYTHON,
        "scripts/train.py",
        "experiment=smoke",
        "data=textfile",
        f"data.path={small_corpus}",
        "trainer.max_steps=200",
        "trainer.val_check_interval=100",
        f"hydra.run.dir={tmp_path}",
    ]
    first = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "run.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        # the first holds the folder's lock from before it writes run.json until it exits; paused, it cannot
        # finish while the second starts up (a fast machine did, and the second then skipped a finished run)
        os.kill(first.pid, signal.SIGSTOP)
        try:
            second = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
        finally:
            os.kill(first.pid, signal.SIGCONT)
        assert second.returncode == 2
        error = [line for line in second.stderr.splitlines() if "[tinygpt]" in line]
        assert len(error) == 1 and f"process {first.pid}" in error[0] and str(tmp_path) in error[0]
        assert first.wait(timeout=600) == 0
    finally:
        first.kill()
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["status"] == "finished" and [p["step"] for p in record["curve"]] == [100, 200]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "last.ckpt",
        "step000100.ckpt",
        "step000200.ckpt",
    ]


# -- every setting validated before anything is written ------------------------------------------------------

BAD = [
    ("optim.grad_clip=-1", "optim.grad_clip"),
    ("optim.weight_decay=-1", "optim.weight_decay"),
    ("optim.warmup_steps=-5", "optim.warmup_steps"),
    ("optim.betas=[0.9,1.5]", "optim.betas"),
    ("optim.decay_fraction=2", "optim.decay_fraction"),
    ("optim.min_lr_ratio=-0.1", "optim.min_lr_ratio"),
    ("lr=0", "optim.lr"),
    ("trainer.max_steps=0", "trainer.max_steps"),
    ("trainer.val_check_interval=0", "trainer.val_check_interval"),
    ("checkpoint.every_n_steps=0", "checkpoint.every_n_steps"),
    ("checkpoint.keep_every_n_steps=-4", "checkpoint.keep_every_n_steps"),
    ("seed=-1", "seed"),
    ("seed=4294967296", "seed"),
    ("sample.temperature=0", "sample.temperature"),
    ("sample.max_new_tokens=-1", "sample.max_new_tokens"),
    ("sample.top_k=0", "sample.top_k"),
    ("sweep.cpu_jobs=0", "sweep.cpu_jobs"),
    ("sweep.simulate_devices=0", "sweep.simulate_devices"),
]


@pytest.mark.parametrize("override,field", BAD, ids=[b[0] for b in BAD])
def test_bad_values_fail_naming_the_field_before_anything_is_written(tiny_cfg, tmp_path, override, field):
    with pytest.raises(ConfigError) as err:
        train(tiny_cfg(override), tmp_path / "run")
    assert str(err.value).startswith(field) and "must be" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "run").exists()


def test_the_extreme_good_values_are_accepted(tiny_cfg):
    from tinygpt.train.schema import parse_run_config

    parse_run_config(
        tiny_cfg(
            "seed=4294967295",
            "optim.grad_clip=0",
            "optim.warmup_steps=0",
            "optim.weight_decay=0",
            "sample.max_new_tokens=0",
            "checkpoint.keep_every_n_steps=null",
        )
    )


def test_a_misspelled_sweep_key_fails_at_composition(tiny_cfg):
    from hydra.errors import ConfigCompositionException

    with pytest.raises(ConfigCompositionException):
        tiny_cfg("sweep.cpujobs=2")


# -- last.ckpt where the state is whole; logs that continue ---------------------------------------------------


def test_last_checkpoint_is_saved_after_the_scoring_validation_and_at_the_end(tiny_cfg, tmp_path, monkeypatch):
    original = GPTModule.training_step

    def crash_at_step_5(self, batch, batch_idx):
        if self.global_step == 4:
            raise RuntimeError("simulated crash")
        return original(self, batch, batch_idx)

    monkeypatch.setattr(GPTModule, "training_step", crash_at_step_5)
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(tiny_cfg(), tmp_path / "a")
    checkpoint = torch.load(tmp_path / "a" / "checkpoints" / "last.ckpt", weights_only=True)
    record = json.loads((tmp_path / "a" / "run.json").read_text())
    # saved after step 4's validation: it knows the score the record has
    assert checkpoint["global_step"] == 4 and checkpoint["best_dev"]["step"] == 4
    assert checkpoint["best_dev"]["bpb"] == record["curve"][-1]["dev_bits_per_byte"]
    monkeypatch.setattr(GPTModule, "training_step", original)

    # max_steps not a multiple of checkpoint.every_n_steps nor of the scoring interval: the last step is saved,
    # after its (final) validation
    record = train(tiny_cfg("trainer.max_steps=6"), tmp_path / "b")
    checkpoint = torch.load(tmp_path / "b" / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["global_step"] == 6 and [p["step"] for p in record["curve"]] == [4, 6]
    assert checkpoint["best_dev"]["step"] == record["best"]["step"]


# dropout on (the RNG state) and a cosine schedule (the scheduler state), with the CSV logger beside TensorBoard
RESUMED = ("model.dropout=0.1", "optim/schedule=cosine", "logger=csv")


@pytest.fixture(scope="module")
def whole(small_corpus, tmp_path_factory) -> Path:
    """The uninterrupted run the interrupted ones are compared with."""
    from conftest import TINY_RUN, compose_train

    run_dir = tmp_path_factory.mktemp("whole")
    train(compose_train([*TINY_RUN, "data=textfile", f"data.path={small_corpus}", *RESUMED]), run_dir)
    return run_dir


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_saves_the_step_and_the_rerun_continues_the_logs_exactly(
    tiny_cfg, whole, tmp_path, monkeypatch, signum
):
    """Ctrl-C (or a preemption's SIGTERM) during step 6: last.ckpt at step 6, status interrupted; the rerun's
    losses, dev scores, CSV rows and TensorBoard scalars equal an uninterrupted run's, each step once."""
    overrides = RESUMED
    original = GPTModule.training_step

    def signal_in_step_6(self, batch, batch_idx):
        if self.global_step == 5:
            os.kill(os.getpid(), signum)
        return original(self, batch, batch_idx)

    monkeypatch.setattr(GPTModule, "training_step", signal_in_step_6)
    with pytest.raises(TrainingInterrupted, match="stopped after step 6"):
        train(tiny_cfg(*overrides), tmp_path / "stopped")
    assert (
        signal.getsignal(signum) is not None
        and json.loads((tmp_path / "stopped" / "run.json").read_text())["status"] == "interrupted"
    )
    assert torch.load(tmp_path / "stopped" / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 6
    monkeypatch.setattr(GPTModule, "training_step", original)

    record = train(tiny_cfg(*overrides), tmp_path / "stopped")
    assert record["status"] == "finished" and record["resumed_from_step"] == 6
    assert_same_history(whole, tmp_path / "stopped")


@pytest.mark.parametrize(
    ("hook", "at_step", "stopped_after"),
    [("on_train_batch_end", 5, 5), ("validation_step", 4, 4)],
    ids=["between-steps", "during-validation"],
)
def test_a_signal_outside_a_training_step_saves_the_step_it_arrived_after(
    tiny_cfg, whole, tmp_path, monkeypatch, capsys, hook, at_step, stopped_after
):
    """SIGTERM after step 5's end and before step 6 starts (the module's on_train_batch_end runs after every
    callback's, so last.ckpt's own end-of-step check has passed: step 5 is not a save step) is saved when the next
    step would start; SIGTERM during step 4's validation is saved after it. Either way last.ckpt holds the step
    the run says it stopped after, and the rerun continues from it to the uninterrupted run's history exactly."""
    original, sent = getattr(GPTModule, hook), []

    def signal_then_continue(self, *args, **kwargs):
        if self.global_step == at_step and not self.trainer.sanity_checking and not sent:  # once: a second stops
            sent.append(os.kill(os.getpid(), signal.SIGTERM))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(GPTModule, hook, signal_then_continue)
    with pytest.raises(TrainingInterrupted, match=f"stopped after step {stopped_after};"):
        train(tiny_cfg(*RESUMED), tmp_path / "stopped")
    saved = torch.load(tmp_path / "stopped" / "checkpoints" / "last.ckpt", weights_only=True)
    assert saved["global_step"] == stopped_after
    record = json.loads((tmp_path / "stopped" / "run.json").read_text())
    assert record["status"] == "interrupted"
    monkeypatch.setattr(GPTModule, hook, original)

    capsys.readouterr()
    record = train(tiny_cfg(*RESUMED), tmp_path / "stopped")
    assert record["status"] == "finished" and record["resumed_from_step"] == stopped_after
    assert f"[tinygpt] resumed from step {stopped_after}: " in capsys.readouterr().out
    assert_same_history(whole, tmp_path / "stopped")


def assert_same_history(whole: Path, resumed: Path) -> None:
    for tag in ("train/loss", "train/lr", "dev/bpb", "dev/loss"):
        expected, got = tb_scalars(whole, tag), tb_scalars(resumed, tag)
        assert [s for s, _ in got] == [s for s, _ in expected], tag  # each step once, none missing
        assert [v for _, v in got] == pytest.approx([v for _, v in expected], abs=1e-6), tag
    expected, got = csv_rows(whole), csv_rows(resumed)
    for key in ("train/loss", "train/lr", "dev/bpb"):
        assert [s for s, _ in column(got, key)] == [s for s, _ in column(expected, key)], key
        assert [v for _, v in column(got, key)] == pytest.approx([v for _, v in column(expected, key)], abs=1e-6)
    curve = lambda d: [(p["step"], p["dev_bits_per_byte"]) for p in json.loads((d / "run.json").read_text())["curve"]]
    assert [s for s, _ in curve(resumed)] == [s for s, _ in curve(whole)]
    assert [v for _, v in curve(resumed)] == pytest.approx([v for _, v in curve(whole)], abs=1e-6)


def test_a_crash_after_the_checkpoint_leaves_no_duplicate_steps(tiny_cfg, whole, tmp_path, monkeypatch):
    """Crash in step 7 (last.ckpt at 4, steps 5 and 6 already logged): the rerun replaces them, once."""
    overrides = RESUMED
    original = GPTModule.training_step

    def crash_at_step_7(self, batch, batch_idx):
        if self.global_step == 6:
            raise RuntimeError("simulated crash")
        return original(self, batch, batch_idx)

    monkeypatch.setattr(GPTModule, "training_step", crash_at_step_7)
    with pytest.raises(RuntimeError):
        train(tiny_cfg(*overrides), tmp_path / "crashed")
    assert [s for s, _ in column(csv_rows(tmp_path / "crashed"), "train/loss")] == [1, 2, 3, 4, 5, 6]
    monkeypatch.setattr(GPTModule, "training_step", original)
    assert train(tiny_cfg(*overrides), tmp_path / "crashed")["resumed_from_step"] == 4
    assert_same_history(whole, tmp_path / "crashed")


def test_a_dev_score_lost_in_the_final_validation_is_recomputed_on_resume(tiny_cfg, tmp_path, monkeypatch):
    from tinygpt.train.record import RunRecord

    original = RunRecord.on_validation_end

    def crash_at_step_6(self, trainer, pl_module):
        if trainer.global_step == 6:
            raise RuntimeError("crash while recording step 6's score")
        return original(self, trainer, pl_module)

    monkeypatch.setattr(RunRecord, "on_validation_end", crash_at_step_6)
    with pytest.raises(RuntimeError):
        train(tiny_cfg("trainer.max_steps=6"), tmp_path)
    assert [p["step"] for p in json.loads((tmp_path / "run.json").read_text())["curve"]] == [4]
    monkeypatch.setattr(RunRecord, "on_validation_end", original)
    record = train(tiny_cfg("trainer.max_steps=6"), tmp_path)
    assert record["status"] == "finished" and [p["step"] for p in record["curve"]] == [4, 6]
    assert record["resumed_from_step"] == 4  # the checkpoint at 6 is only written after step 6's score
    assert [s for s, _ in tb_scalars(tmp_path, "dev/bpb")] == [4, 6]


# -- a checkpoint must fit the run it is loaded into ----------------------------------------------------------


def test_a_checkpoint_of_another_model_is_refused_before_the_folder_is_touched(tiny_cfg, tmp_path):
    train(tiny_cfg(), tmp_path / "other")
    train(tiny_cfg("model.d_model=48", "logger=csv"), tmp_path / "run")
    before = {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()}
    other = tmp_path / "other" / "checkpoints" / "last.ckpt"
    with pytest.raises(CheckpointError, match=r"another model \(model.d_model=32 there, 48 here\)") as err:
        train(tiny_cfg("model.d_model=48", "logger=csv", f"ckpt_path={other}"), tmp_path / "run")
    assert "\n" not in str(err.value)
    after = {p: p.read_bytes() for p in (tmp_path / "run").rglob("*") if p.is_file()}
    assert after == before  # run.json still finished, metrics.csv still there, checkpoints untouched


def test_another_tokenizer_or_optimizer_is_refused():
    checkpoint = {
        "hyper_parameters": {"model": {"d_model": 8}, "optim": {"lr": 1e-3, "schedule": "constant"}, "max_steps": 10},
        "tokenizer": '{"chars": "ab"}',
    }
    same = dict(model={"d_model": 8}, optim={"lr": 1e-3, "schedule": "constant"}, max_steps=20)
    check_resumable(checkpoint, "x.ckpt", **same, tokenizer_json='{"chars": "ab"}')  # longer, constant: fine
    with pytest.raises(CheckpointError, match="another tokenizer"):
        check_resumable(checkpoint, "x.ckpt", **same, tokenizer_json='{"chars": "abc"}')
    with pytest.raises(CheckpointError, match="optim.lr=0.001 there, 0.002 here"):
        check_resumable(
            checkpoint,
            "x.ckpt",
            model={"d_model": 8},
            optim={"lr": 2e-3, "schedule": "constant"},
            max_steps=10,
            tokenizer_json=None,
        )


def test_continuing_a_cosine_run_with_another_max_steps_is_refused(tiny_cfg, tmp_path):
    train(tiny_cfg("optim/schedule=cosine"), tmp_path)
    last = tmp_path / "checkpoints" / "last.ckpt"
    before = (tmp_path / "run.json").read_bytes()
    with pytest.raises(CheckpointError, match="trainer.max_steps=8 under optim.schedule=cosine; continuing to 16"):
        train(tiny_cfg("optim/schedule=cosine", "trainer.max_steps=16", f"ckpt_path={last}"), tmp_path)
    assert (tmp_path / "run.json").read_bytes() == before


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["trainer.val_check_interval=0"],
            "trainer.val_check_interval=0 is not allowed: must be a positive integer (validate every N optimizer "
            "steps)",
        ),
        (
            ["score_once.steps=[9]", "trainer.max_steps=8"],
            "score_once.steps=[9] is not allowed: each must be an integer in [1, trainer.max_steps=8]",
        ),
        (
            ["score_once.steps=[8]", "score_once.seeds=[1,2]", "trainer.max_steps=8"],
            "seed=0 is not one of the recipe's pre-registered score_once.seeds=[1, 2]",
        ),
    ],
)
def test_the_command_line_reports_a_bad_value_in_one_line_and_makes_no_folder(
    small_corpus, tmp_path, overrides, message
):
    """Checked before Hydra makes the run's folder (tinygpt/train/preflight.py's callback): no folder, no
    .hydra/, no train.log, no run.lock is left behind a refused setting or pre-registration."""
    where = tmp_path / "run"
    done = subprocess.run(
        [
            sys.executable,
            "scripts/train.py",
            "experiment=smoke",
            "data=textfile",
            f"data.path={small_corpus}",
            *overrides,
            f"hydra.run.dir={where}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"[tinygpt] error: {message}")
    assert not where.exists()
