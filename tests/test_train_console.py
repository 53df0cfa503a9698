"""Everyday use: the console entry points are the scripts, and a run's output in a log has progress lines, no
per-refresh bar lines and no third-party advertisements."""

from __future__ import annotations

import importlib
import logging
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import tomllib
from conftest import PYTHON, REPO
from lightning.pytorch.callbacks import TQDMProgressBar

from tinygpt.bench import generate as bench_generate
from tinygpt.train.callbacks.progress import LineProgress, progress_callback
from tinygpt.train.console import TIP_LOGGERS, NoThirdPartyTips, silence_third_party_tips

ENTRY_POINTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def test_every_entry_point_is_the_script_of_the_same_name():
    assert {
        "tinygpt-train",
        "tinygpt-evaluate",
        "tinygpt-generate",
        "tinygpt-report",
        "tinygpt-export",
        "tinygpt-import-hf",
        "tinygpt-params",
        "tinygpt-analyze",
        "tinygpt-baselines",
        "tinygpt-register",
        "tinygpt-data-stats",
        "tinygpt-prepare",
        "tinygpt-bench-train",
        "tinygpt-bench-generate",
        "tinygpt-bench-data",
        "tinygpt-step-parts",
    } <= set(ENTRY_POINTS)
    for command, target in ENTRY_POINTS.items():
        module, function = target.split(":")
        entry = getattr(importlib.import_module(module), function)
        script = REPO / "scripts" / (command.removeprefix("tinygpt-").replace("-", "_") + ".py")
        namespace = {"__name__": "not_main"}  # run the script's imports, not its main
        exec(compile(script.read_text(), str(script), "exec"), namespace)
        assert namespace["main"] is entry, command


@pytest.mark.parametrize(
    "command,expected",
    [
        ("tinygpt-train", "model: blog, gpt2_124m"),
        ("tinygpt-export", "family: auto"),
        ("tinygpt-report", "usage: tinygpt-report"),
    ],
)
def test_installed_commands_answer_help_from_anywhere(command, expected, tmp_path):
    executable = Path(sys.executable).parent / command
    assert executable.is_file(), f"{command} is not installed: run make install"
    done = subprocess.run([str(executable), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert expected in done.stdout


def test_progress_style_is_chosen_at_trainer_build(monkeypatch):
    monkeypatch.setattr("tinygpt.train.callbacks.progress.is_terminal", lambda: False)
    auto = progress_callback("auto", 7)
    assert isinstance(auto, LineProgress) and auto.every_n_steps == 7
    monkeypatch.setattr("tinygpt.train.callbacks.progress.is_terminal", lambda: True)
    assert isinstance(progress_callback("auto", 7), TQDMProgressBar)
    assert isinstance(progress_callback("lines", 3), LineProgress)
    assert isinstance(progress_callback("bar", 3), TQDMProgressBar)
    with pytest.raises(ValueError, match="progress.style='fancy' is not allowed: must be one of auto, bar, lines"):
        progress_callback("fancy", 3)
    with pytest.raises(ValueError, match="progress.every_n_steps=0 is not allowed"):
        progress_callback("lines", 0)


def test_lightning_tips_are_filtered_out_and_only_them(caplog, monkeypatch):
    # importing the standalone package (as a submitit job does) re-points rank_zero_info's logger to its own
    pytest.importorskip("pytorch_lightning")
    loggers = [logging.getLogger(name) for name in TIP_LOGGERS]
    # rank 0, with its loggers on, whatever ran before in this worker: a package imported while a test's
    # environment named another rank (SLURM_PROCID, RANK: read at import) keeps that rank, and rank_zero_info then
    # logs nothing; a tool's job_logging=disabled (Hydra's disable_existing_loggers) turns the loggers off
    for name in TIP_LOGGERS:  # each is its module's logger
        module = sys.modules.get(name)
        if module is not None:
            monkeypatch.setattr(module.rank_zero_only, "rank", 0)
    for logger in [*loggers, logging.getLogger("lightning.pytorch"), logging.getLogger("lightning.fabric")]:
        monkeypatch.setattr(logger, "disabled", False)
        monkeypatch.setattr(logger, "propagate", True)
    for logger in loggers:  # first without the filter: Lightning does advertise (so this test can fail)
        for f in [f for f in logger.filters if isinstance(f, NoThirdPartyTips)]:
            logger.removeFilter(f)
    with caplog.at_level(logging.INFO):
        L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    assert any("💡 Tip" in r.getMessage() for r in caplog.records)
    caplog.clear()
    silence_third_party_tips()
    with caplog.at_level(logging.INFO):
        L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
    messages = [r.getMessage() for r in caplog.records]
    assert not any("Tip" in m or "litlogger" in m or "litmodels" in m for m in messages)
    assert any("GPU available" in m for m in messages)  # Lightning's own information stays


def smoke_run(small_corpus, run_dir, *extra: str) -> subprocess.CompletedProcess:
    """experiment=smoke through scripts/train.py, with the progress bar allowed and lines every 3 steps."""
    return subprocess.run(
        [PYTHON, "scripts/train.py", "experiment=smoke", "data=textfile", f"data.path={small_corpus}"]
        + ["trainer.enable_progress_bar=true", "progress.every_n_steps=3", f"hydra.run.dir={run_dir}", *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_logged_run_prints_lines_every_n_steps_and_no_advertisement(small_corpus, tmp_path):
    # stdout and stderr are pipes here, as in a log file or a SLURM job: progress.style=auto picks lines
    done = smoke_run(small_corpus, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    output = done.stdout + done.stderr
    assert "💡" not in output and "litlogger" not in output and "litmodels" not in output
    assert "\r" not in output  # no bar redraws
    # last.ckpt is saved with its full state on purpose, so Lightning has nothing to say about weights_only
    assert "weights_only" not in output
    assert "LeafSpec" not in output  # torch's FutureWarning about Lightning's own pytree code, every run
    steps = [line.split()[2] for line in done.stdout.splitlines() if line.startswith("[tinygpt] step ")]
    # every 3 steps and the last (8), plus the validations at 4 and 8
    assert steps == ["3/8", "4/8", "6/8", "8/8", "8/8"]
    assert [line for line in done.stdout.splitlines() if line.startswith("[tinygpt] step 6/8")][0].count("loss") == 1


def test_bench_generate_tables_cached_and_uncached_generation(tmp_path):
    """tinygpt-bench-generate builds 000's modern variant from the presets, times both loops and writes its page:
    the row for each length says the cached tokens equal the uncached ones (exit 0 only then)."""
    out = tmp_path / "generate.md"
    assert bench_generate.main(["--new-tokens", "2", "3", "--repeats", "1", "--out", str(out)]) == 0
    page = out.read_text()
    assert "Produced by `tinygpt-bench-generate --out docs/benchmarks/generate.md`" in page
    rows = [line for line in page.splitlines() if line.startswith(("| 2 |", "| 3 |"))]
    assert len(rows) == 2 and all(row.endswith("| yes |") for row in rows)
    assert "28,484,352 parameters" in page


def test_dev_scoring_progress_shows_the_share_done_and_the_time_left(monkeypatch):
    """The dev-scoring line of progress.style=lines: batches done of the total, the share, and the time left."""
    from types import SimpleNamespace

    from tinygpt.common import progress as progress_module
    from tinygpt.train.callbacks.progress import LineProgress

    said = []
    monkeypatch.setattr(progress_module, "say", said.append)
    clock = iter([0.0, 0.0, 12.0, 24.0]).__next__
    monkeypatch.setattr(progress_module.time, "monotonic", clock)
    callback = LineProgress(every_n_steps=10)
    trainer = SimpleNamespace(num_val_batches=[30, 10], global_step=250, max_steps=4000, sanity_checking=False)
    callback.on_validation_start(trainer, None)
    callback._validation.update(10)
    assert said == ["step 250/4000  scoring dev: 10/40 batches (25%), 12 s, about 36 s left"]


def test_a_run_under_the_bar_still_logs_its_step_and_dev_lines_to_train_log(small_corpus, tmp_path):
    """progress.style=bar (a terminal's choice): the bar on the console, LineProgress's lines in train.log."""
    done = smoke_run(small_corpus, tmp_path, "progress.style=bar")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[tinygpt] step " not in done.stdout  # the console has the bar, not the lines
    log = (tmp_path / "train.log").read_text().splitlines()
    steps = [line.split(" - ", 1)[1].split()[1] for line in log if " - step " in line and "scoring" not in line]
    assert steps == ["3/8", "4/8", "6/8", "8/8", "8/8"]
