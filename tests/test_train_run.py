"""Training runs end to end, in-process: seeds, exact resume, failures that keep what was written."""

from __future__ import annotations

import importlib.metadata
import json
import math
import platform
import subprocess
from pathlib import Path

import hydra
import lightning
import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

from tinygpt.train import provenance
from tinygpt.train.checkpoints import CheckpointError
from tinygpt.train.module import GPTModule, NonFiniteLossError
from tinygpt.train.run import train
from tinygpt.train.schema import ConfigError


def scalar_events(run_dir: Path, tag: str) -> list[dict[int, float]]:
    """{step: value} of one tag, per TensorBoard event file in write order (a resumed run adds a file)."""
    files = sorted((run_dir / "tb").glob("events.out.tfevents.*"), key=lambda p: p.stat().st_mtime_ns)
    per_file = []
    for path in files:
        values = {}
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                if value.tag == tag:
                    values[event.step] = float(
                        torch.tensor(value.tensor.float_val[0] if value.tensor.float_val else value.simple_value)
                    )
        per_file.append(values)
    return per_file


def train_losses(run_dir: Path) -> dict[int, float]:
    merged = {}
    for values in scalar_events(run_dir, "train/loss"):
        merged.update(values)
    return merged


def test_run_writes_record_checkpoints_and_tensorboard(tiny_cfg, tmp_path):
    record = train(tiny_cfg(), tmp_path)
    assert record["status"] == "finished" and record["step"] == 8
    saved = json.loads((tmp_path / "run.json").read_text())
    assert [p["step"] for p in saved["curve"]] == [4, 8]
    assert saved["parameters"] == sum(
        p.numel()
        for p in GPTModule(
            saved["config"]["model"] | {"vocab_size": saved["data"]["vocab_size"]}, saved["config"]["optim"], 8
        ).model.parameters()
    )
    assert saved["best"]["dev_bits_per_byte"] == min(p["dev_bits_per_byte"] for p in saved["curve"])
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()
    assert {p.name for p in (tmp_path / "checkpoints").glob("step*.ckpt")} == {"step000004.ckpt", "step000008.ckpt"}

    events = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0, "tensors": 0}).Reload()
    tags = set(events.Tags()["scalars"])
    assert {
        "train/loss",
        "train/loss_bits",
        "train/lr",
        "train/grad_norm",
        "train/tokens_per_sec",
        "train/mfu",
        "dev/bpb",
        "dev/loss",
        "dev/best_bpb",
        "hp/best_dev_bpb",
    } <= tags
    assert [e.step for e in events.Scalars("dev/bpb")] == [4, 8]
    assert [e.step for e in events.Scalars("train/loss")] == list(range(1, 9)) or [
        e.step for e in events.Scalars("train/loss")
    ] == list(range(0, 8))
    loss_nats = events.Scalars("train/loss")[-1].value
    assert events.Scalars("train/loss_bits")[-1].value == pytest.approx(loss_nats / math.log(2), rel=1e-5)
    assert "sample/text_summary" in events.Tags()["tensors"]


def test_a_run_without_a_dev_split_still_records_its_sample_and_mfu(tiny_cfg, tmp_path):
    """No validation ever runs: the sampler samples once when training ends, and the speed monitor reads the
    model's FLOPs per token when training starts (tinygpt/train/callbacks/__init__.py)."""
    record = train(tiny_cfg("data.dev=none", "trainer.max_steps=3", "sample.prompt=a"), tmp_path)
    assert record["status"] == "finished" and record["curve"] == []
    assert isinstance(record["sample"], str) and record["sample"].startswith("a") and len(record["sample"]) > 1
    events = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0}).Reload()
    assert all(e.value > 0 for e in events.Scalars("train/mfu"))


def test_run_json_records_what_produced_it(tiny_cfg, tmp_path):
    """Versions, the checkout's commit and whether it was dirty, Python, the device, precision and the MFU peak."""
    record = train(tiny_cfg("speed.peak_flops=2.5e9"), tmp_path)
    [session] = record["provenance"]
    assert session["torch"] == torch.__version__ and session["lightning"] == lightning.__version__
    assert session["hydra-core"] == hydra.__version__ and session["python"] == platform.python_version()
    assert session["tinygpt"] == importlib.metadata.version("tinygpt")
    repo = Path(__file__).resolve().parents[1]
    if (repo / ".git").exists():
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True)
        assert session["commit"] == head.stdout.strip() and isinstance(session["dirty"], bool)
    assert session["device_type"] == "cpu" and session["device"] == provenance.device_name(torch.device("cpu"))
    assert session["precision"] == "32-true"
    assert (session["matmul_peak_flops"], session["matmul_peak_source"]) == (2.5e9, "speed.peak_flops")
    assert json.loads((tmp_path / "run.json").read_text())["provenance"] == record["provenance"]


def test_seed_zero_is_a_seed(tiny_cfg, tmp_path):
    """seed=0 must seed (the popular template's ``if cfg.get("seed")`` skips it)."""
    runs = {
        name: train(tiny_cfg(f"seed={seed}", "model.dropout=0.1"), tmp_path / name)
        for name, seed in (("a0", 0), ("b0", 0), ("c1", 1))
    }
    losses = {name: train_losses(tmp_path / name) for name in runs}
    assert losses["a0"] == losses["b0"]
    assert losses["a0"] != losses["c1"]


def test_exact_resume_after_a_crash(tiny_cfg, tmp_path, crash_at_step_6):
    """Stopped at step 6 (last.ckpt at 4) and resumed: steps 5-8 match the uninterrupted run to 1e-6,
    with dropout on (the RNG state) and a cosine schedule (the scheduler state)."""
    overrides = ("model.dropout=0.1", "optim/schedule=cosine")
    stop_crashing = crash_at_step_6
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(tiny_cfg(*overrides), tmp_path / "stopped")
    assert json.loads((tmp_path / "stopped" / "run.json").read_text())["status"] == "failed"
    stop_crashing()
    train(tiny_cfg(*overrides), tmp_path / "whole")
    reference = train_losses(tmp_path / "whole")

    record = train(tiny_cfg(*overrides), tmp_path / "stopped")
    assert record["status"] == "finished" and record["resumed_from_step"] == 4
    resumed = scalar_events(tmp_path / "stopped", "train/loss")[-1]
    assert sorted(resumed) == sorted(s for s in reference if s >= min(resumed))
    assert len(resumed) == 4
    for step, value in resumed.items():
        assert value == pytest.approx(reference[step], abs=1e-6)
    assert [p["step"] for p in record["curve"]] == [4, 8]
    # each training session says what produced it, from the step it started at
    assert [session["from_step"] for session in record["provenance"]] == [0, 4]


def test_a_run_stopped_after_its_last_step_resumes_to_its_summary_and_keeps_its_best(tiny_cfg, tmp_path, capsys):
    """A SIGTERM during the last step saves last.ckpt at the last step and leaves the run interrupted: rerun, it has
    nothing to train or validate, and must still finish with its best and print its summary."""
    first = train(tiny_cfg(), tmp_path)
    saved = json.loads((tmp_path / "run.json").read_text())
    (tmp_path / "run.json").write_text(json.dumps(saved | {"status": "interrupted"}))  # as the SIGTERM leaves it
    capsys.readouterr()
    again = train(tiny_cfg(), tmp_path)
    assert again["status"] == "finished" and again["step"] == 8
    assert again["best"] == first["best"] and again["curve"] == first["curve"]
    assert f"(best {first['best']['dev_bits_per_byte']:.4f} at step" in capsys.readouterr().out


def test_finished_run_is_skipped(tiny_cfg, tmp_path, capsys):
    first = train(tiny_cfg(), tmp_path)
    stamp = (tmp_path / "checkpoints" / "last.ckpt").stat().st_mtime_ns
    again = train(tiny_cfg(), tmp_path)
    said = capsys.readouterr().out
    assert "already finished" in said
    # advice that works: resume=never refuses a folder with checkpoints, another folder trains anew
    assert "resume=never" not in said and "give it another folder (hydra.run.dir=" in said
    with pytest.raises(ConfigError, match="resume=never: .* already holds checkpoints"):
        train(tiny_cfg("resume=never"), tmp_path)
    assert again == first
    assert (tmp_path / "checkpoints" / "last.ckpt").stat().st_mtime_ns == stamp


def test_a_finished_run_committed_without_its_checkpoints_is_skipped(tiny_cfg, tmp_path, capsys):
    """docs/sweeps.md, "A sweep that outlives its machine": job folders are committed without checkpoints/, and
    a rerun in a fresh checkout must skip them (run.json says finished), not train them again from step 0."""
    import shutil

    first = train(tiny_cfg(), tmp_path)
    shutil.rmtree(tmp_path / "checkpoints")
    record_before = (tmp_path / "run.json").read_bytes()
    again = train(tiny_cfg(), tmp_path)
    assert "already finished" in capsys.readouterr().out
    assert again == first
    assert not (tmp_path / "checkpoints").exists() and (tmp_path / "run.json").read_bytes() == record_before


def test_corrupt_checkpoint_fails_cleanly_and_overwrites_nothing(tiny_cfg, tmp_path):
    ckpt_dir = tmp_path / "checkpoints"
    ckpt_dir.mkdir()
    garbage = b"PK\x03\x04 this is not a checkpoint"
    (ckpt_dir / "last.ckpt").write_bytes(garbage)
    with pytest.raises(CheckpointError, match="unreadable") as err:
        train(tiny_cfg(), tmp_path)
    assert "\n" not in str(err.value)
    assert (ckpt_dir / "last.ckpt").read_bytes() == garbage
    assert not (tmp_path / "run.json").exists()


def test_missing_checkpoint_path_is_a_clear_error(tiny_cfg, tmp_path):
    with pytest.raises(CheckpointError, match="not found: .*nope.ckpt"):
        train(tiny_cfg(f"ckpt_path={tmp_path / 'nope.ckpt'}"), tmp_path / "run")


def test_truncated_checkpoint_is_detected(tiny_cfg, tmp_path):
    train(tiny_cfg(), tmp_path / "good")
    data = (tmp_path / "good" / "checkpoints" / "last.ckpt").read_bytes()
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="unreadable"):
        train(tiny_cfg(f"ckpt_path={cut}"), tmp_path / "other")


def test_nan_loss_stops_with_the_step_and_keeps_the_last_good_checkpoint(tiny_cfg, tmp_path, monkeypatch):
    from tinygpt.model import GPT

    original = GPT.features  # what training calls (the loss is fused with the head: speed.loss)

    def poisoned(self, idx, *args, **kwargs):
        hidden, aux = original(self, idx, *args, **kwargs)
        if self.training and poisoned.calls >= 5:
            hidden = hidden * float("nan")
        poisoned.calls += self.training
        return hidden, aux

    poisoned.calls = 0
    monkeypatch.setattr(GPT, "features", poisoned)
    with pytest.raises(NonFiniteLossError, match="at step 6"):
        train(tiny_cfg(), tmp_path)
    checkpoint = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)
    assert checkpoint["global_step"] == 4
    assert all(torch.isfinite(v).all() for v in checkpoint["state_dict"].values() if v.is_floating_point())
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "failed"


def test_invalid_model_fails_before_anything_is_written(tiny_cfg, tmp_path):
    """A model setting is checked with the rest of the config, when it is parsed: one line, nothing in the folder."""
    with pytest.raises(ConfigError, match=r"^GPTConfig\.n_heads=3 is not allowed: must be a divisor of d_model"):
        train(tiny_cfg("model.n_heads=3"), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_checkpoints_are_written_atomically(tmp_path, monkeypatch):
    """A save that dies midway leaves the previous checkpoint whole and no temp file behind."""
    from tinygpt.train.checkpoints import AtomicCheckpointIO, read_checkpoint

    io, path = AtomicCheckpointIO(), tmp_path / "checkpoints" / "last.ckpt"
    io.save_checkpoint({"global_step": 4, "weights": torch.ones(3)}, path)
    real_save = torch.save

    def dies_midway(obj, file, *args, **kwargs):
        file.write(b"PK\x03\x04 half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", dies_midway)
    with pytest.raises(OSError, match="disk full"):
        io.save_checkpoint({"global_step": 8, "weights": torch.zeros(3)}, path)
    monkeypatch.setattr(torch, "save", real_save)
    assert read_checkpoint(path)["global_step"] == 4
    assert [p.name for p in path.parent.iterdir()] == ["last.ckpt"]


def test_gradients_are_clipped_at_optim_grad_clip_and_the_norm_before_is_logged(tiny_cfg, tmp_path, monkeypatch):
    real_clip = torch.nn.utils.clip_grads_with_norm_  # the module measures the norm once, then scales by it
    seen = []

    def recording_clip(parameters, max_norm, total_norm, *args, **kwargs):
        parameters = list(parameters)
        grads = [p.grad for p in parameters if p.grad is not None]
        before = torch.stack([g.norm() for g in grads]).norm()
        real_clip(parameters, max_norm, total_norm, *args, **kwargs)
        after = torch.stack([g.norm() for g in grads]).norm()
        assert float(total_norm) == pytest.approx(float(before), rel=1e-5)
        seen.append((max_norm, float(before), float(after)))

    monkeypatch.setattr(torch.nn.utils, "clip_grads_with_norm_", recording_clip)
    train(tiny_cfg("optim.grad_clip=0.05"), tmp_path)
    assert len(seen) == 8 and all(max_norm == 0.05 for max_norm, _, _ in seen)
    assert all(before > 0.05 and after == pytest.approx(0.05, rel=1e-3) for _, before, after in seen)
    logged = scalar_events(tmp_path, "train/grad_norm")[0]
    assert sorted(logged.values()) == pytest.approx(sorted(before for _, before, _ in seen), rel=1e-5)


def test_clipping_by_value_is_honoured(tiny_cfg, tmp_path, monkeypatch):
    real_clip_value = torch.nn.utils.clip_grad_value_
    seen = []

    def recording_clip_value(parameters, clip_value, *args, **kwargs):
        parameters = list(parameters)
        real_clip_value(parameters, clip_value, *args, **kwargs)
        seen.append((clip_value, max(float(p.grad.abs().max()) for p in parameters if p.grad is not None)))

    monkeypatch.setattr(torch.nn.utils, "clip_grad_value_", recording_clip_value)
    train(tiny_cfg("optim.grad_clip=1e-4", "+trainer.gradient_clip_algorithm=value"), tmp_path)
    assert len(seen) == 8 and all(value == 1e-4 and largest <= 1e-4 for value, largest in seen)
    assert len(scalar_events(tmp_path, "train/grad_norm")[0]) == 8


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    """A real git checkout standing in for the one tinygpt is imported from: one committed file, one ignored."""
    repo = tmp_path / "checkout"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    (repo / "model.py").write_text("x = 1\n")
    (repo / ".gitignore").write_text("outputs/\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    (repo / "outputs").mkdir()
    (repo / "outputs" / "run.log").write_text("ignored\n")
    monkeypatch.setattr(provenance, "CHECKOUT", repo)
    return repo


def test_run_json_says_whether_the_checkout_was_dirty(checkout, tiny_cfg, tmp_path):
    """dirty is false for a clean checkout (an ignored file does not count), true with an untracked file or a
    modified tracked one, and the commit is the checkout's; a training run writes what it found into run.json."""
    head = git(checkout, "rev-parse", "HEAD")
    assert provenance.git_state() == (head, False)
    assert (provenance.collect("cpu", "32-true")["commit"], provenance.collect("cpu", "32-true")["dirty"]) == (
        head,
        False,
    )
    (checkout / "scratch.py").write_text("y = 2\n")  # untracked
    assert provenance.collect("cpu", "32-true")["dirty"] is True
    (checkout / "scratch.py").unlink()
    (checkout / "model.py").write_text("x = 2\n")  # tracked, modified
    assert provenance.git_state() == (head, True)
    record = train(tiny_cfg(), tmp_path / "run")
    [session] = json.loads((tmp_path / "run" / "run.json").read_text())["provenance"]
    assert (session["commit"], session["dirty"]) == (head, True) == (record["provenance"][0]["commit"], True)
    git(checkout, "checkout", "--", "model.py")
    assert provenance.git_state() == (head, False)


def test_a_callback_added_in_the_config_runs_and_one_dropped_is_gone(tiny_cfg, tmp_path):
    """conf/callbacks/: Lightning's own LearningRateMonitor added with Hydra's ``+`` logs the learning rate; the
    sampler dropped with ``~`` leaves no sample; neither changes the recipe (the score-once switches)."""
    from tinygpt.train.score_once import recipe_switches

    cfg = tiny_cfg(
        "+callbacks.lr_monitor._target_=lightning.pytorch.callbacks.LearningRateMonitor",
        "+callbacks.lr_monitor.logging_interval=step",
        "~callbacks.sample",
    )
    record = train(cfg, tmp_path)
    assert record["status"] == "finished" and record["sample"] is None
    events = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0}).Reload()
    # Lightning's monitor logs the rate a step trains with before that step; tinygpt's train/lr after it
    monitored = {e.step + 1: e.value for e in events.Scalars("lr-AdamW/pg1")}
    assert monitored == {e.step: e.value for e in events.Scalars("train/lr")} and len(monitored) == 8
    assert "TextSampler" not in json.dumps(record["config"]) and "sample" not in record["config"]["callbacks"]
    assert recipe_switches(record["config"]) == recipe_switches(train(tiny_cfg(), tmp_path / "plain")["config"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "~callbacks.last_checkpoint",
            r"^callbacks: no tinygpt\.train\.callbacks\.last_checkpoint\.LastCheckpoint; a run",
        ),
        (
            "callbacks.speed._target_=tinygpt.train.callbacks.throughput.ThroughputMonitr",
            r"^callbacks\.speed \(tinygpt\.train\.callbacks\.throughput\.Th",
        ),
        ("checkpoint.every_n_steps=0", r"^checkpoint\.every_n_steps=0 is not allowed: must be a positive integer$"),
        ("progress.style=fancy", r"^progress\.style='fancy' is not allowed: must be one of auto"),
        ("+callbacks.nothing.a=1", r"^callbacks\.nothing: give a _target_"),
    ],
)
def test_a_bad_callback_fails_in_one_line_before_anything_is_written(tiny_cfg, tmp_path, override, message):
    with pytest.raises(ConfigError, match=message):
        train(tiny_cfg(override), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_the_training_sample_takes_top_p_as_tinygpt_generate_does(tiny_cfg, tmp_path):
    """sample.top_p: nucleus sampling for the samples written while training; at a nucleus this small only the most
    likely token is ever kept, so the sample is the greedy continuation of the trained model."""
    from tinygpt.model import generate
    from tinygpt.train.checkpoints import load_model

    record = train(tiny_cfg("data.dev=none", "trainer.max_steps=3", "sample.prompt=a", "sample.top_p=1e-9"), tmp_path)
    model, tokenizer, _ = load_model(tmp_path / "checkpoints" / "last.ckpt")
    prompt = torch.tensor([tokenizer.encode("a")])
    greedy = generate(model, prompt, len(tokenizer.encode(record["sample"])) - 1, greedy=True)
    assert record["sample"] == tokenizer.decode(greedy[0].tolist())
    with pytest.raises(ConfigError, match=r"sample\.top_p=1\.5 is not allowed: must be null or a number in \(0, 1\]"):
        train(tiny_cfg("sample.top_p=1.5"), tmp_path / "other")


@pytest.mark.parametrize(
    ("setting", "text", "why"),
    [
        ("model.prenorm=false", None, "post-norm blocks (prenorm=false) exist in no transformers causal-LM class"),
        (None, "a stray \ufffd replacement character\n", "its vocabulary holds '\ufffd'"),
    ],
)
def test_a_finished_run_names_the_export_command_only_when_it_would_work(
    tiny_cfg, tmp_path, capsys, setting, text, why
):
    from tinygpt.api import train as api_train

    extra = [setting] if setting else []
    if text is not None:
        corpus = tmp_path / "corpus.txt"
        corpus.write_text((text + "the time traveller was here. ") * 200)
        extra += [f"data.path={corpus}"]
    api_train(tiny_cfg(*extra, "trainer.max_steps=2"), tmp_path / "run")
    said = capsys.readouterr().out
    assert "tinygpt-evaluate" in said and "tinygpt-export" not in said
    assert "(no export to transformers: " in said and why in said
    api_train(tiny_cfg("trainer.max_steps=2"), tmp_path / "plain")  # an exportable run names the command
    assert "  tinygpt-export " in capsys.readouterr().out
