"""The trackers beside TensorBoard (tinygpt/train/trackers.py), for real and offline: MLflow's own client and wandb's
own reader of its offline run read back what a tiny run logged, and its held-out scores."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tinygpt.train.evaluate import evaluate
from tinygpt.train.preflight import check_run_config
from tinygpt.train.run import train

pytestmark = pytest.mark.slow  # tracker start-ups: a few seconds each

BIN = Path(sys.executable).parent


def dev_points(run_dir: Path) -> list[tuple[int, float]]:
    return [(p["step"], p["dev_bits_per_byte"]) for p in json.loads((run_dir / "run.json").read_text())["curve"]]


def test_mlflow_reads_back_the_dev_curve_the_config_the_name_and_the_held_out_scores(tiny_cfg, tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run_dir = tmp_path / "sweep" / "model=tiny,seed=0"
    train(tiny_cfg("logger=[csv,mlflow]", "trainer.max_steps=6", "name=trackers"), run_dir)
    known = json.loads((run_dir / "trackers.json").read_text())["mlflow"]
    assert known["tracking_uri"] == f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}"  # the default store
    client = MlflowClient(known["tracking_uri"])
    history = [(m.step, m.value) for m in client.get_metric_history(known["run_id"], "dev/bpb")]
    assert history == dev_points(run_dir) and len(history) == 2  # the same floats
    run = client.get_run(known["run_id"])
    assert run.info.run_name == "trackers/model=tiny,seed=0"
    assert run.data.tags["model"] == "tiny" and run.data.tags["seed"] == "0"
    assert run.data.params["model/d_model"] == str(
        json.loads((run_dir / "run.json").read_text())["config"]["model"]["d_model"]
    )
    assert run.data.params["name"] == "trackers" and run.data.params["sample/prompt"]  # the resolved config

    # a resumed run continues the same MLflow run (here: the finished run trained on from its last checkpoint)
    last = run_dir / "checkpoints" / "last.ckpt"
    train(tiny_cfg("logger=[csv,mlflow]", "trainer.max_steps=8", "name=trackers", f"ckpt_path='{last}'"), run_dir)
    assert json.loads((run_dir / "trackers.json").read_text())["mlflow"]["run_id"] == known["run_id"]
    assert [m.step for m in client.get_metric_history(known["run_id"], "dev/bpb")][-1] == 8

    # the held-out scores join it
    rows = evaluate(str(run_dir), split="test")
    held_out = {m.step: m.value for m in client.get_metric_history(known["run_id"], "test/bpb")}
    assert held_out == pytest.approx({row["step"]: row["bits_per_byte"] for row in rows})


def test_mlflow_honours_mlflow_tracking_uri(tiny_cfg, tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    store = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store)
    train(tiny_cfg("logger=mlflow", "trainer.max_steps=2"), tmp_path / "run")
    assert json.loads((tmp_path / "run" / "trackers.json").read_text())["mlflow"]["tracking_uri"] == store
    assert (tmp_path / "elsewhere.db").is_file() and not (tmp_path / "outputs").exists()


def test_wandb_runs_offline_and_its_own_reader_finds_the_dev_curve(tiny_cfg, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = tmp_path / "seed=3"
    train(tiny_cfg("logger=wandb", "trainer.max_steps=6", "seed=3"), run_dir)
    known = json.loads((run_dir / "trackers.json").read_text())["wandb"]
    [offline] = (run_dir / "wandb").glob(f"offline-run-*-{known['id']}")  # offline by default: nothing uploaded
    records = subprocess.run(
        [str(BIN / "wandb"), "leet", "inspect", str(offline), "--json"], capture_output=True, text=True, timeout=120
    )
    assert records.returncode == 0, records.stderr[-2000:]
    history = [json.loads(line)["history"]["item"] for line in records.stdout.splitlines() if '"history"' in line]
    logged = [(item["trainer/global_step"], item["dev/bpb"]) for item in history if "dev/bpb" in item]
    assert logged == dev_points(run_dir) and len(logged) == 2
    summary = subprocess.run(
        [str(BIN / "wandb"), "leet", "inspect", str(offline), "--summary", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    config = json.loads(summary.stdout)["config"]
    assert config["seed"] == 3 and config["data"]["name"] == "textfile"  # the resolved config


@pytest.mark.parametrize(("logger", "module", "extra"), [("wandb", "wandb", "wandb"), ("mlflow", "mlflow", "mlflow")])
def test_a_missing_tracker_package_is_one_line_with_the_pip_command(tiny_cfg, monkeypatch, logger, module, extra):
    import importlib.util

    from tinygpt.common.errors import ConfigError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a))
    with pytest.raises(ConfigError, match=rf"^logger={logger} needs {module}: pip install 'tinygpt\[{extra}\]'$"):
        check_run_config(tiny_cfg(f"logger={logger}"))
