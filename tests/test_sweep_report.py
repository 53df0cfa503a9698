"""The report on a hand-made partial sweep: runs grouped by overrides minus seed, the 000 and 003 table shapes,
finished / unfinished / failed / missing runs marked, the CSV, the figure, and no held-out reads."""

from __future__ import annotations

import builtins
import csv
import json
from pathlib import Path

import pytest
import yaml

from tinygpt.report.jobs import load_sweep
from tinygpt.report.report import write_report
from tinygpt.report.tables import auto_style

COMMAND = ["experiment=since_gpt2", "model.position=learned,rope", "seed=1,2,3", "trainer.devices=1"]
EXCLUDED = ["resume", "trainer.devices", "sweep.cpu_jobs"]


def curve(start: float, steps=(50, 100, 150)) -> list[dict]:
    """A validation curve that falls, then overfits at the last step."""
    values = [start, start - 0.5, start - 0.4][: len(steps)]
    return [
        {"step": s, "dev_loss": v, "dev_bits_per_byte": v * 1.5, "train_loss": v}
        for s, v in zip(steps, values, strict=True)
    ]


def add_job(sweep: Path, overrides: list[str], record: dict | None) -> Path:
    folder = sweep / ",".join(o for o in overrides if not o.startswith("trainer.devices"))
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    if record is not None:
        points = record.setdefault("curve", [])
        if points:
            best = min(points, key=lambda p: p["dev_bits_per_byte"])
            record["best"] = {
                "step": best["step"],
                "dev_bits_per_byte": best["dev_bits_per_byte"],
                "dev_loss": min(p["dev_loss"] for p in points),
            }
            record["final"] = points[-1]
        (folder / "run.json").write_text(json.dumps({"parameters": 1000, **record}))
    (folder / "evaluations.jsonl").write_text('{"split": "test", "bits_per_byte": 0.001}\n')  # must stay unread
    return folder


@pytest.fixture
def sweep(tmp_path) -> Path:
    sweep = tmp_path / "since_gpt2"
    sweep.mkdir()
    (sweep / "multirun.yaml").write_text(
        yaml.safe_dump(
            {
                "hydra": {
                    "overrides": {"task": COMMAND},
                    "job": {"config": {"override_dirname": {"exclude_keys": EXCLUDED}}},
                }
            }
        )
    )
    base = ["experiment=since_gpt2"]
    for seed, start in ((1, 6.0), (2, 6.2), (3, 6.1)):
        add_job(
            sweep,
            [*base, "model.position=learned", f"seed={seed}", "trainer.devices=1"],
            {"status": "finished", "curve": curve(start), "step": 150},
        )
    add_job(
        sweep,
        [*base, "model.position=rope", "seed=1", "trainer.devices=1"],
        {"status": "finished", "curve": curve(5.8), "step": 150},
    )
    add_job(
        sweep,
        [*base, "model.position=rope", "seed=2", "trainer.devices=1"],
        {"status": "running", "curve": curve(5.9, steps=(50,))},
    )  # killed after its first validation
    # seed 3 of rope never started: no folder at all
    return sweep


@pytest.fixture
def no_heldout_reads(monkeypatch):
    """Fails any attempt to open a job's evaluations file (where held-out scores are kept)."""
    real_open, real_read_text = builtins.open, Path.read_text

    def guarded_open(file, *args, **kwargs):
        assert "evaluations" not in str(file), f"the report opened {file}"
        return real_open(file, *args, **kwargs)

    def guarded_read_text(self, *args, **kwargs):
        assert "evaluations" not in self.name, f"the report read {self}"
        return real_read_text(self, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    monkeypatch.setattr(Path, "read_text", guarded_read_text)


def test_jobs_are_the_commands_runs_including_the_missing_one(sweep):
    jobs = load_sweep(sweep)
    assert [(j.variant[-1], j.seed, j.status) for j in jobs] == [
        ("model.position=learned", 1, "finished"),
        ("model.position=learned", 2, "finished"),
        ("model.position=learned", 3, "finished"),
        ("model.position=rope", 1, "finished"),
        ("model.position=rope", 2, "unfinished"),
        ("model.position=rope", 3, "missing"),
    ]
    assert all("trainer.devices=1" not in j.overrides for j in jobs)  # excluded keys do not name a job


def test_seeds_table_in_000s_shape(sweep, no_heldout_reads):
    report = write_report(sweep, style="seeds")
    table = report.markdown.read_text()
    assert "| Variant | Parameters | Best validation loss, seeds 1 / 2 / 3 | Mean | Spread |" in table
    # best = the lowest dev loss of each curve (start - 0.5)
    assert "| model.position=learned | 1,000 | 5.500 / 5.700 / 5.600 | 5.600 | 0.200 |" in table
    assert "| model.position=rope | 1,000 | 5.300 / 5.900* / missing | 5.300 (1 of 3) | — |" in table
    assert "every run shares `experiment=since_gpt2`" in table
    assert report.style == "seeds" and report.metric == "dev_loss"


def test_steps_table_in_003s_shape(sweep, no_heldout_reads):
    table = write_report(sweep, style="steps", metric="dev_bits_per_byte").markdown.read_text()
    assert "| Variant | Seed | Parameters | step 50 | step 100 | step 150 |" in table
    assert "| model.position=learned | 2 | 1,000 | 9.300 | 8.550 | 8.700 |" in table
    assert "| model.position=rope | 2 (unfinished) | 1,000 | 8.850* | — | — |" in table
    assert "| model.position=rope | 3 (missing) | — | — | — | — |" in table


def test_csv_has_every_validation_point_of_every_run_and_the_figure_is_drawn(sweep, no_heldout_reads):
    report = write_report(sweep)
    with report.table.open() as handle:
        rows = list(csv.DictReader(handle))
    # one row per run and validation point: 4 finished runs x 3 points, the killed run's 1 point, the missing run
    assert [(r["status"], r["val_step"]) for r in rows] == [
        ("finished", s) for _ in range(4) for s in ("50", "100", "150")
    ] + [("unfinished", "50"), ("missing", "")]
    first = rows[0]
    assert (first["seed"], first["best_step"], float(first["best_dev_loss"]), first["final_step"]) == (
        "1",
        "100",
        5.5,
        "150",
    )
    assert float(first["final_dev_bpb"]) == pytest.approx(5.6 * 1.5)
    # seed 2 of learned: its curve (6.2, 5.7, 5.8) point by point, loss and bits per byte
    seed2 = [r for r in rows if r["variant"] == "experiment=since_gpt2 model.position=learned" and r["seed"] == "2"]
    assert [(int(r["val_step"]), float(r["dev_loss"]), float(r["dev_bpb"]), float(r["train_loss"])) for r in seed2] == [
        (50, 6.2, pytest.approx(9.3), 6.2),
        (100, 5.7, pytest.approx(8.55), 5.7),
        (150, pytest.approx(5.8), pytest.approx(8.7), pytest.approx(5.8)),
    ]
    assert "Every validation point of every run" in report.markdown.read_text()
    png = report.figure.read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_auto_style_follows_the_scoring_steps(sweep):
    jobs = load_sweep(sweep)
    assert auto_style(jobs) == "steps"  # 3 scoring steps, as 003's 1,000 / 2,000 / 3,000 / 4,000
    for job in jobs:
        if job.record:
            job.record["curve"] = [dict(p, step=s) for p in job.record["curve"][:1] for s in range(50, 650, 50)]
    assert auto_style(jobs) == "seeds"  # 12 scoring steps, as 000's every 50 of 600


def test_cli_writes_next_to_the_sweep(sweep, capsys):
    import importlib.util

    spec = importlib.util.spec_from_file_location("report_cli", Path(__file__).parents[1] / "scripts" / "report.py")
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    assert cli.main([str(sweep), "--style", "seeds"]) == 0
    assert {"report.md", "curves.png", "runs.csv"} <= {p.name for p in sweep.iterdir()}
    assert "Best validation loss" in capsys.readouterr().out


def test_held_out_scores_only_when_asked(sweep):
    folder = next(p for p in sweep.iterdir() if "learned" in p.name and "seed=1" in p.name)
    rows = [
        {
            "time": "2026-01-01T10:00:00+0000",
            "checkpoint": "/x/checkpoints/step000100.ckpt",
            "split": "test",
            "step": 100,
            "bits_per_byte": 2.5,
            "forced": False,
            "reason": None,
        },
        {"split": "dev", "step": 100, "bits_per_byte": 9.0},
        {"time": "2026-01-01T11:00:00+0000", "split": "test", "step": 150, "bits_per_byte": 2.7},
        {
            "time": "2026-01-02T09:00:00+0000",
            "checkpoint": "/x/checkpoints/step000100.ckpt",
            "split": "test",
            "step": 100,
            "bits_per_byte": 2.4,
            "forced": True,
            "reason": "after the metric fix",
        },
    ]
    (folder / "evaluations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert "Held-out scores (" not in write_report(sweep).markdown.read_text()
    report = write_report(sweep, held_out=True)
    text = report.markdown.read_text()
    assert "This report shows held-out scores" in text and "never read" not in text
    # every scoring ever made, by time: the forced second look is listed beside the first, with its reason
    assert "| 2026-01-01T10:00:00+0000 | " + folder.name + " | 1 | 100 | step000100.ckpt | 2.500 | no | — |" in text
    assert "| 2026-01-01T11:00:00+0000 | " + folder.name + " | 1 | 150 | — | 2.700 | — | — |" in text
    assert (
        "| 2026-01-02T09:00:00+0000 | " + folder.name + " | 1 | 100 | step000100.ckpt | 2.400 | yes | "
        "after the metric fix |" in text
    )
    assert text.count("| evaluate |") == 3  # the dev row is not a held-out scoring
    assert "| Variant | Seed | step 100 | step 150 | best (step) |" in text
    # by step: each step's first scoring (score once), not the forced second look
    assert "| model.position=learned | 1 | 2.500 | 2.700 | 2.500 (100) |" in text
    assert (sweep / "heldout.png").read_bytes().startswith(b"\x89PNG")


def test_the_wording_says_whether_held_out_scores_exist_without_reading_them(sweep, no_heldout_reads):
    # the fixture's job folders hold an evaluations.jsonl that run.json does not list (a run scored before)
    text = write_report(sweep).markdown.read_text()
    assert "never read" not in text
    assert "Held-out scores exist but are not shown: run.json lists 0 held-out scoring(s) of 0 run(s)" in text
    assert "5 run(s) also have an evaluations.jsonl from before run.json listed scorings" in text
    for folder in sweep.iterdir():
        if (folder / "evaluations.jsonl").exists():
            (folder / "evaluations.jsonl").unlink()
    assert "No run has been scored on the held-out split" in write_report(sweep).markdown.read_text()
    folder = next(p for p in sweep.iterdir() if "rope" in p.name and "seed=1" in p.name)
    record = json.loads((folder / "run.json").read_text())
    record["held_out_scorings"] = [
        {"time": "t1", "step": 150, "forced": False},
        {"time": "t2", "step": 150, "forced": True, "reason": "r"},
    ]
    (folder / "run.json").write_text(json.dumps(record))
    text = write_report(sweep).markdown.read_text()
    assert (
        "Held-out scores exist but are not shown: run.json lists 2 held-out scoring(s) of 1 run(s) "
        "(`--held-out` shows them); this report read none of them." in text
    )
    assert "Held-out scores (" not in text and "2.4" not in text


def test_figure_can_show_some_variants_while_the_table_keeps_all(sweep, no_heldout_reads):
    import matplotlib.pyplot as plt

    drawn = []
    real_plot = plt.Axes.plot
    plt.Axes.plot = lambda self, *args, **kwargs: drawn.append(kwargs.get("label")) or real_plot(self, *args, **kwargs)
    try:
        report = write_report(sweep, style="seeds", figure_only=["model.position=rope"], ymax=7.7)
    finally:
        plt.Axes.plot = real_plot
    assert drawn == ["(all runs)", None]  # rope seeds 1 and 2 (3 is missing); learned is left out
    assert "| model.position=learned |" in report.markdown.read_text()
    with pytest.raises(ValueError, match=r"figure_only=\['model.position=sinusoidal'\]"):
        write_report(sweep, figure_only=["model.position=sinusoidal"])


def test_a_sweep_without_dev_scores_says_so_instead_of_an_empty_table(sweep, no_heldout_reads):
    for folder in sweep.iterdir():
        if (folder / "run.json").exists():
            record = json.loads((folder / "run.json").read_text())
            record["curve"], record["best"], record["final"] = [], None, None
            (folder / "run.json").write_text(json.dumps(record))
    report = write_report(sweep, style="seeds")
    text = report.markdown.read_text()
    assert "No run has a validation loss (a sweep without a dev split" in text
    assert "| Variant |" not in text
    # nothing to draw: no empty axes passed off as a figure, no link to one, no mean over an absent table
    assert report.figure is None and not (sweep / "curves.png").exists()
    assert "curves.png" not in text and "Mean and spread" not in text


def test_a_variant_without_the_differing_override_is_the_defaults_not_all_runs():
    """Beside data/fraction=quarter, the run with the experiment's own fraction is its default, not every run."""
    from tinygpt.report.tables import variant_labels

    quarter, full = ("experiment=x", "data/fraction=quarter"), ("experiment=x",)
    assert variant_labels([quarter, full]) == {quarter: "data/fraction=quarter", full: "(defaults)"}
    assert variant_labels([full]) == {full: "(all runs)"}


def test_a_run_folder_written_before_the_metric_rename_still_reads(sweep, no_heldout_reads):
    """run.json's best once named dev bits per byte "dev_bpb"; the report reads it under today's name."""
    path = next(sweep.glob("*position=learned,seed=2*/run.json"))
    record = json.loads(path.read_text())
    record["best"]["dev_bpb"] = record["best"].pop("dev_bits_per_byte")
    path.write_text(json.dumps(record))
    report = write_report(sweep, style="seeds", metric="dev_bits_per_byte")
    with report.table.open() as handle:
        row = next(r for r in csv.DictReader(handle) if r["seed"] == "2" and "learned" in r["variant"])
    assert float(row["best_dev_bpb"]) == pytest.approx(5.7 * 1.5)
    assert f"{5.7 * 1.5:.3f}" in report.markdown.read_text()


def test_a_collected_sweep_keeps_its_experiments_name(sweep, tmp_path, monkeypatch):
    """docs/results/ keeps sweeps as <name>/runs/: the report and figure name the experiment, not "runs"."""
    import shutil

    import tinygpt.report.report as report_module
    from tinygpt.report.jobs import Job

    titles = []
    real_plot = report_module.plot_curves
    monkeypatch.setattr(
        report_module, "plot_curves", lambda *a, title, **k: titles.append(title) or real_plot(*a, title=title, **k)
    )
    collected = shutil.copytree(sweep, tmp_path / "results" / "runs")
    assert write_report(collected).markdown.read_text().startswith("# Sweep report: since_gpt2\n")
    assert titles[-1].startswith("since_gpt2: ")
    assert write_report(collected, title="000, 600 steps").markdown.read_text().startswith("# Sweep report: 000,")
    assert titles[-1].startswith("000, 600 steps: ")
    # no experiment that every run shares: the folder's name
    mixed = [Job(("experiment=x", "seed=1"), None, None), Job(("experiment=y", "seed=1"), None, None)]
    assert report_module.sweep_title(collected, mixed) == "runs"
    assert report_module.sweep_title(collected, [Job(("+experiment=z",), None, None)]) == "z"


def test_a_single_runs_folder_is_reported_as_a_sweep_of_one(tiny_cfg, tmp_path, capsys):
    """tinygpt-report RUN_DIR: its curves and table, not "holds no sweep jobs"."""
    from tinygpt.cli.report import main
    from tinygpt.train.run import train

    run_dir = tmp_path / "run"
    train(tiny_cfg(), run_dir)
    [job] = load_sweep(run_dir)
    assert job.status == "finished" and job.path == run_dir
    assert main([str(run_dir)]) == 0
    assert "1 run (1 finished)" in (run_dir / "report.md").read_text()
    assert (run_dir / "curves.png").stat().st_size > 10_000
    with open(run_dir / "runs.csv") as f:
        assert {row["status"] for row in csv.DictReader(f)} == {"finished"}


def test_a_report_never_sets_runs_of_different_texts_against_each_other(tiny_cfg, tmp_path, small_corpus):
    """Two unrelated sweeps that shared a folder (the same name): refused in one line, nothing written."""
    from tinygpt.common.errors import ConfigError
    from tinygpt.train.run import train

    other = tmp_path / "other.txt"
    other.write_text("an entirely different text, " * 600)
    sweep = tmp_path / "sweep"
    for job, path in (("seed=0", small_corpus), ("seed=1", other)):
        train(tiny_cfg(f"data.path={path}", "trainer.max_steps=2"), sweep / job)
        (sweep / job / ".hydra").mkdir()
        (sweep / job / ".hydra" / "overrides.yaml").write_text(f"- {job}\n")
    with pytest.raises(ConfigError, match=r"holds runs scored on 2 different texts .*: a report sets only runs of one"):
        write_report(sweep, out_dir=tmp_path / "report")
    assert not (tmp_path / "report").exists()
