"""The hyperparameter search (-m hparams_search=...): a three-trial Optuna study on a tiny model, killed mid-trial and
run again (it continues the same study and trains the killed trial on from its checkpoint), run a third time (it
adds no trial), with the median pruner stopping the hopeless trials; its report; the winner registered as an
experiment that composes to the winner's config, pre-registers its scoring and trains to the winner's dev score;
and the refusals: a held-out objective, a searched or fixed held-out split, a misspelled sweeper key."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import time
from pathlib import Path

import optuna
import pytest
import torch
from conftest import CONF, PYTHON, REPO, TINY_RUN
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from optuna.trial import TrialState

from tinygpt.cli import register as register_cli
from tinygpt.cli import report as report_cli
from tinygpt.common.errors import ConfigError
from tinygpt.launch.search import run_search
from tinygpt.launch.search_config import SearchRefused
from tinygpt.launch.study import parse_space, remember_space
from tinygpt.report.jobs import load_sweep
from tinygpt.train.run import train
from tinygpt.train.score_once import pre_registration

STEPS, CHECK = 120, 40  # each trial's steps, and its dev scoring (and pruning) interval
N_TRIALS = 3
SEARCH = f"""# @package _global_
defaults:
  - override /hydra/sweeper: optuna_search
name: tiny_search
trainer:
  max_steps: {STEPS}
  val_check_interval: {CHECK}
checkpoint:
  every_n_steps: 20
hydra:
  sweeper:
    n_trials: {N_TRIALS}
    sampler:  # seed 6 samples a good lr first and a hopeless one (1.4e-5) second
      _target_: optuna.samplers.TPESampler
      seed: 6
    pruner:
      _target_: optuna.pruners.MedianPruner
      n_startup_trials: 1
      n_warmup_steps: 0
    params:
      lr: tag(log, interval(1e-5, 3e-2))
      model.n_layers: choice(1, 2)
"""


def status(folder: Path) -> str | None:
    try:
        return json.loads((folder / "run.json").read_text())["status"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return None


def study_of(sweep: Path) -> optuna.Study:
    return optuna.load_study(study_name="tiny_search", storage=f"sqlite:///{sweep / 'study.db'}")


@pytest.fixture(scope="module")
def search(small_corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("search")
    conf = root / "conf"
    (conf / "hparams_search").mkdir(parents=True)
    (conf / "hparams_search" / "tiny.yaml").write_text(SEARCH)
    sweep = root / "sweep"
    command = [
        PYTHON,
        "scripts/train.py",
        "--config-dir",
        str(conf),
        "-m",
        "hparams_search=tiny",
        *TINY_RUN,
        "data=textfile",
        f"data.path={small_corpus}",
        f"sweep.lease_dir={root / 'leases'}",
        f"hydra.sweep.dir={sweep}",
    ]
    first_trial = sweep / "trial_0000"
    with open(root / "first.log", "w") as log:
        first = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and first.poll() is None:
                if status(first_trial) == "running" and (first_trial / "checkpoints" / "last.ckpt").exists():
                    break
                time.sleep(0.02)
        finally:
            os.killpg(first.pid, signal.SIGKILL)  # the search and its worker, in the middle of trial 0
            first.wait(timeout=30)
    killed = {
        "status": status(first_trial),
        "trials": [(t.number, t.state) for t in study_of(sweep).trials],
        "step": torch.load(first_trial / "checkpoints" / "last.ckpt", weights_only=True)["global_step"],
        "log": (root / "first.log").read_text()[-3000:],
    }
    resumed = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600)
    records = {p.parent.name: p.stat().st_mtime_ns for p in sweep.glob("trial_*/run.json")}
    # again, with a setting that only says how jobs run: the same search
    again = subprocess.run(
        [*command, "progress.every_n_steps=5"], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    return {"sweep": sweep, "conf": conf, "killed": killed, "resumed": resumed, "again": again, "records": records}


@pytest.mark.slow
def test_a_killed_search_continues_its_study_and_trains_the_killed_trial_on(search):
    killed, resumed, sweep = search["killed"], search["resumed"], search["sweep"]
    assert killed["status"] == "running", killed["log"]
    assert killed["trials"] == [(0, TrialState.RUNNING)], "killed during trial 0, the study's only trial"
    assert 0 < killed["step"] < STEPS
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "continuing trial(s) 0 left running by an earlier launch" in resumed.stdout
    trials = study_of(sweep).trials
    assert [t.number for t in trials] == list(range(N_TRIALS)), "no trial duplicated or lost"
    assert all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)
    record = json.loads((sweep / "trial_0000" / "run.json").read_text())
    assert record["status"] == "finished" and record["step"] == STEPS
    assert [s["from_step"] for s in record["provenance"]] == [0, killed["step"]], "trained on from its checkpoint"


def test_the_search_names_its_best_trial(search):
    study = study_of(search["sweep"])
    best = study.best_trial
    assert best.value == min(t.value for t in study.trials if t.state == TrialState.COMPLETE)
    record = json.loads((search["sweep"] / f"trial_{best.number:04d}" / "run.json").read_text())
    assert best.value == record["best"]["dev_bits_per_byte"]
    assert f"best trial {best.number} (trial_{best.number:04d}), {best.value:.4f}" in search["resumed"].stdout


def test_running_the_finished_search_again_adds_no_trial(search):
    again, sweep = search["again"], search["sweep"]
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(study_of(sweep).trials) == N_TRIALS
    assert "search tiny_search: trials" not in again.stdout  # no batch was asked for
    assert {p.parent.name: p.stat().st_mtime_ns for p in sweep.glob("trial_*/run.json")} == search["records"]


def test_a_changed_search_is_refused_in_its_folder():
    study = optuna.create_study()
    lr = {"lr": "interval(1e-4, 1e-3)"}
    execution = ["progress.style"]  # the sweep's override_dirname.exclude_keys: how jobs run, not what they train
    remember_space(
        study, parse_space(lr, ["experiment=smoke", "data=peps", "progress.style=lines"]), "best.dev_loss", execution
    )
    for same in (["experiment=smoke", "data=peps"], ["data=peps", "progress.style=bar", "experiment=smoke"]):
        remember_space(study, parse_space(lr, same), "best.dev_loss", execution)  # not refused
    for params, fixed, objective in [
        ({"lr": "interval(1e-4, 1e-2)"}, ["experiment=smoke", "data=peps"], "best.dev_loss"),
        (lr, ["experiment=smoke"], "best.dev_loss"),
        (lr, ["experiment=smoke", "data=peps"], "final.dev_loss"),
    ]:
        with pytest.raises(SearchRefused, match="this folder's study searched"):
            remember_space(study, parse_space(params, fixed), objective, execution)


def test_the_median_pruner_stops_a_hopeless_trial_early(search):
    sweep = search["sweep"]
    trials = study_of(sweep).trials
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    assert pruned, [(t.number, t.state, t.intermediate_values) for t in trials]
    for trial in pruned:
        folder = sweep / f"trial_{trial.number:04d}"
        record = json.loads((folder / "run.json").read_text())
        step = record["pruned"]["step"]
        assert record["status"] == "pruned" and step < STEPS and record["step"] == step
        assert torch.load(folder / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == step
        # worse than the median of the trials finished before it, at the same step (MedianPruner's rule)
        earlier = [
            t.intermediate_values[step]
            for t in trials
            if t.state == TrialState.COMPLETE and t.number < trial.number and step in t.intermediate_values
        ]
        assert earlier and trial.intermediate_values[step] > statistics.median(earlier)
    # a trial that reached its last step finished, even where the pruner would have stopped it (trial 2 here)
    assert all(t.state == TrialState.COMPLETE for t in trials if STEPS in t.intermediate_values)


def test_the_report_of_a_search_has_its_trials_best_trial_importances_and_plots(search, capsys):
    sweep = search["sweep"]
    assert report_cli.main([str(sweep)]) == 0
    text = (sweep / "report.md").read_text()
    best = study_of(sweep).best_trial
    assert "## Search: study `tiny_search`" in text
    assert f"**Best: trial {best.number}** (`trial_{best.number:04d}`), {best.value:.4f}" in text
    # fANOVA with its forest seeded, named as such (Optuna's default evaluator is PED-ANOVA), over the finished trials
    finished = [t for t in study_of(sweep).trials if t.state == TrialState.COMPLETE]
    assert (
        f"Parameter importances (fANOVA, Optuna's `FanovaImportanceEvaluator(seed=0)`, over the {len(finished)} "
        in text
    )
    fanova = optuna.importance.get_param_importances(
        study_of(sweep), evaluator=optuna.importance.FanovaImportanceEvaluator(seed=0)
    )
    assert len(finished) >= 2 and fanova
    for name, weight in fanova.items():
        assert f"- `{name}`: {weight:.3f}" in text, name
    rows = (sweep / "trials.csv").read_text().splitlines()
    assert rows[0].split(",")[:4] == ["trial", "state", "lr", "model.n_layers"]
    assert len(rows) == 1 + N_TRIALS
    assert (sweep / "search_history.png").stat().st_size > 0 and (sweep / "search_slice.png").stat().st_size > 0


def test_two_trials_with_the_same_values_are_two_runs_in_the_report(search, tmp_path):
    """A sampler may draw the same values twice: each trial is a run of its own (the report lost trial 0 of the PEPs
    search, whose values trial 2 drew again, behind the unfinished trial 2)."""
    sweep = tmp_path / "sweep"
    shutil.copytree(search["sweep"], sweep, ignore=shutil.ignore_patterns("*.ckpt", "tb"))
    again = sweep / f"trial_{N_TRIALS:04d}"
    shutil.copytree(sweep / "trial_0000" / ".hydra", again / ".hydra")  # trial 0's values, no run record
    overrides = again / ".hydra" / "overrides.yaml"
    overrides.write_text(overrides.read_text().replace("trial=0\n", f"trial={N_TRIALS}\n"))
    jobs = {job.path.name: job for job in load_sweep(sweep)}
    assert sorted(jobs) == [f"trial_{n:04d}" for n in range(N_TRIALS + 1)]
    assert jobs["trial_0000"].record["status"] == "finished" and jobs[again.name].record is None
    assert f"trial={N_TRIALS}" in jobs[again.name].overrides


def test_the_winner_registers_as_an_experiment_that_trains_to_its_score(search, tmp_path):
    sweep, conf = search["sweep"], search["conf"]
    best = study_of(sweep).best_trial
    register_cli.main([str(sweep), "name=tiny_best", "seeds=0,1", "--config-dir", str(conf)])
    path = conf / "experiment" / "tiny_best.yaml"
    assert path.exists()
    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=["experiment=tiny_best", "seed=0", f"hydra.searchpath=[file://{conf}]"])
    assert cfg.lr == best.params["lr"] and cfg.optim.lr == best.params["lr"]
    assert cfg.model.n_layers == best.params["model.n_layers"]
    assert cfg.trainer.max_steps == STEPS and cfg.name == "tiny_best"  # the search's own setting travels too
    registered = pre_registration(OmegaConf.to_container(cfg, resolve=True))
    assert (registered["steps"], registered["seeds"], registered["recipe"]) == ([STEPS], [0, 1], "tiny_best")
    with pytest.raises(ConfigError, match="seed=2 is not one of the recipe's pre-registered score_once.seeds"):
        cfg2 = OmegaConf.to_container(cfg, resolve=True)
        pre_registration({**cfg2, "seed": 2})
    # trained as registered (seed 0, the trials' seed), it scores what the winner scored on dev
    result = train(cfg, tmp_path / "run")
    assert result["best"]["dev_bits_per_byte"] == pytest.approx(best.value, abs=1e-6)
    with pytest.raises(SystemExit, match="tiny_best.yaml exists"):  # never overwritten
        register_cli.main([str(sweep), "name=tiny_best", "--config-dir", str(conf)])
    # the winner at a longer budget: the change is stated, the scoring step follows it, the rest is the winner's
    register_cli.main([str(sweep), "name=tiny_long", f"trainer.max_steps={2 * STEPS}", "--config-dir", str(conf)])
    assert (
        f"# Changed from the trial: trainer.max_steps={2 * STEPS}"
        in (conf / "experiment" / "tiny_long.yaml").read_text()
    )
    with initialize_config_dir(str(CONF), version_base="1.3"):
        long = compose("train", overrides=["experiment=tiny_long", f"hydra.searchpath=[file://{conf}]"])
    assert long.trainer.max_steps == 2 * STEPS and list(long.score_once.steps) == [2 * STEPS]
    assert long.lr == best.params["lr"] and long.model.n_layers == best.params["model.n_layers"]
    with pytest.raises(SystemExit, match="model.n_layerz=3: not a setting"):
        register_cli.main([str(sweep), "name=tiny_bad", "model.n_layerz=3", "--config-dir", str(conf)])


SWEEPER = {"params": {"lr": "interval(1e-4, 1e-3)"}}


@pytest.mark.parametrize(
    "sweeper, arguments, message",
    [
        ({**SWEEPER, "objective": "best.test_bits_per_byte"}, [], "a held-out score cannot be a search's objective"),
        ({**SWEEPER, "objective": "best.train_loss"}, [], "not an objective; allowed: best.dev_bits_per_byte"),
        ({**SWEEPER, "direction": "maximize"}, [], "allowed: minimize"),
        ({"params": {"split": "choice(dev, test)"}}, [], "a search may not set split"),
        (SWEEPER, ["data.test_fraction=0"], "a search may not set data.test_fraction"),
        ({"params": {"data.test_documents": "choice([a], [b])"}}, [], "a search may not set data.test_documents"),
        ({"params": {}}, [], "nothing to search"),
    ],
)
def test_a_search_that_could_read_the_held_out_split_is_refused_before_anything_is_written(
    tmp_path, sweeper, arguments, message
):
    config = OmegaConf.create({"name": "refused", "hydra": {"sweep": {"dir": str(tmp_path / "sweep")}}})
    with pytest.raises(SearchRefused, match=message):
        run_search(OmegaConf.create(sweeper), config, launcher=None, arguments=arguments)
    assert not (tmp_path / "sweep").exists()


def test_a_misspelled_sweeper_key_fails_at_composition():
    with initialize_config_dir(str(CONF), version_base="1.3"):
        with pytest.raises(ConfigCompositionException, match="n_trialz"):
            compose("train", overrides=["hparams_search=peps", "hydra.sweeper.n_trialz=3"], return_hydra_config=True)


class FakeLauncher:
    """Stands in for the placement launcher: records each batch and 'trains' each trial by writing its run.json
    (dev score = |log10 lr + 2.5|, so lr near 10^-2.5 wins); the trial whose lr is the smallest crashes."""

    def __init__(self, sweep: Path, crash_below: float = 0.0):
        self.sweep, self.crash_below, self.batches = sweep, crash_below, []

    def launch(self, batch, initial_job_idx):
        from hydra.core.utils import JobReturn, JobStatus

        self.batches.append((initial_job_idx, [list(o) for o in batch]))
        results = []
        for overrides in batch:
            values = dict(o.split("=", 1) for o in overrides)
            lr, folder = float(values["lr"]), self.sweep / values["hydra.sweep.subdir"]
            assert folder.name == f"trial_{int(values['trial']):04d}"
            if lr < self.crash_below:
                results.append(JobReturn(status=JobStatus.FAILED, _return_value=RuntimeError("simulated crash")))
                continue
            folder.mkdir(parents=True)
            score = abs(math.log10(lr) + 2.5)
            record = {"status": "finished", "best": {"step": 10, "dev_bits_per_byte": score}}
            (folder / "run.json").write_text(json.dumps(record))
            results.append(JobReturn(status=JobStatus.COMPLETED, _return_value=score))
        return results


def test_trials_go_out_in_batches_of_n_jobs_and_a_crashed_trial_is_recorded_failed(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    config = OmegaConf.create({"name": "batches", "hydra": {"sweep": {"dir": str(sweep)}, "launcher": {"n_jobs": 3}}})
    sweeper = OmegaConf.create({"n_trials": 7, "params": {"lr": "tag(log, interval(1e-5, 1e-1))"}})
    launcher = FakeLauncher(sweep, crash_below=1e-4)
    run_search(sweeper, config, launcher, ["experiment=smoke"])
    # n_jobs=null: as many at once as the launcher runs (hydra.launcher.n_jobs); the last batch takes what is left
    assert [(start, len(batch)) for start, batch in launcher.batches] == [(0, 3), (3, 3), (6, 1)]
    assert all(batch[0][0] == "experiment=smoke" for _, batch in launcher.batches)
    study = optuna.load_study(study_name="batches", storage=f"sqlite:///{sweep / 'study.db'}")
    states = {t.number: t.state for t in study.trials}
    lrs = {t.number: t.params["lr"] for t in study.trials}
    assert [n for n, s in states.items() if s == TrialState.FAIL] == [n for n, lr in lrs.items() if lr < 1e-4]
    assert len(states) == 7 and TrialState.RUNNING not in states.values()
    best = study.best_trial
    assert best.value == pytest.approx(abs(math.log10(best.params["lr"]) + 2.5))
    # n_jobs=2, given: a rerun with more trials asks for them two at a time
    more = OmegaConf.merge(sweeper, {"n_trials": 10, "n_jobs": 2})
    launcher = FakeLauncher(sweep)
    run_search(more, config, launcher, ["experiment=smoke"])
    assert [(start, len(batch)) for start, batch in launcher.batches] == [(7, 2), (9, 1)]
    # the continued study's sampler does not start over: no trial repeats an earlier one's values
    lrs = [
        t.params["lr"]
        for t in optuna.load_study(study_name="batches", storage=f"sqlite:///{sweep / 'study.db'}").trials
    ]
    assert len(set(lrs)) == len(lrs) == 10


def test_a_sweep_and_its_report_run_where_optuna_cannot_be_imported(small_corpus, tmp_path):
    """Optuna is the search's library alone: Hydra imports the search sweeper's plugin module whenever a program
    starts, and every program registers the search's schema, so both must leave Optuna out (a machine without it,
    such as the lent GPU machine's kit, trains). A fresh interpreter in which ``import optuna`` fails runs a
    one-job multirun through tinygpt-train's entry point and reports its folder."""
    sweep = tmp_path / "sweep"
    overrides = [*TINY_RUN, "data=textfile", f"data.path={small_corpus}", "seed=0", "sweep.cpu_jobs=1"]
    code = (
        "import sys\n"
        "sys.modules['optuna'] = None  # import optuna raises ImportError from here on\n"
        "from tinygpt.cli.train import main\n"
        f"sys.argv = ['tinygpt-train', '-m', *{overrides!r}, 'hydra.sweep.dir={sweep}']\n"
        "main()\n"
        "from tinygpt.cli.report import main as report\n"
        f"sys.exit(report([{str(sweep)!r}]))\n"
    )
    done = subprocess.run([PYTHON, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "Error importing" not in done.stderr  # Hydra's plugin scan imported the sweeper's module cleanly
    [record] = [json.loads(path.read_text()) for path in sweep.glob("*/run.json")]
    assert record["status"] == "finished"
    assert (sweep / "report.md").is_file()


def test_the_command_refuses_a_held_out_objective_in_one_line_without_m(tmp_path):
    """hparams_search makes the command a multirun by itself (hydra.mode), and a refusal is one line, exit 2."""
    done = subprocess.run(
        [
            PYTHON,
            "scripts/train.py",
            "experiment=smoke",
            "hparams_search=peps",
            "hydra.sweeper.objective=final.test_bits_per_byte",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith("[tinygpt] refused: hydra.sweeper.objective=final.test_bits_per_byte: a held-out score cannot be")
    )
    assert "Traceback" not in done.stderr and not (tmp_path / "sweep").exists()
