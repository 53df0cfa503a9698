"""Parts of one's own, from a folder outside the package: a position encoding, an MLP and a learning-rate schedule
registered by a module (``custom_imports=[my_parts]``) with their YAML in a config folder (``--config-dir``),
trained by tinygpt-train and loaded back from the checkpoint by a process that knows nothing of them but the
checkpoint. Nothing in tinygpt/ is edited. A module that is not there fails in one line naming the field."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import textwrap

import pytest
from conftest import PYTHON, REPO, TINY_RUN

from tinygpt.common.errors import ConfigError
from tinygpt.train.checkpoints import CheckpointError, load_model
from tinygpt.train.run import train

MY_PARTS = '''
"""A Primer-style squared-ReLU MLP, a position encoding that adds a constant, and a schedule at half the peak."""
import torch
from torch import nn

from tinygpt.model.gpt import MLPS
from tinygpt.model.position import POSITIONS, Positions
from tinygpt.train.schedules import SCHEDULES


class ShiftPositions(Positions):
    def embeddings(self, start, n, device):
        return torch.full((n, 1), 0.5, device=device)


class ReLU2MLP(nn.Module):
    has_aux_loss = False

    def __init__(self, d_model):
        super().__init__()
        self.up, self.down = nn.Linear(d_model, 4 * d_model, bias=False), nn.Linear(4 * d_model, d_model, bias=False)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)) ** 2), None


def halving(step, warmup_steps, total_steps, min_lr_ratio, decay_fraction):
    return 0.5


POSITIONS["shift"] = ShiftPositions
MLPS["relu2"] = lambda config, implementation: ReLU2MLP(config.d_model)
SCHEDULES["halving"] = halving
'''
CONFIGS = {
    "model/position/shift.yaml": "# @package model\nposition: shift\n",
    "model/mlp/relu2.yaml": "# @package model\nmlp: relu2\n",
    "optim/schedule/halving.yaml": "# @package optim\nschedule: halving\n",
}


@pytest.fixture(scope="module")
def own_parts(tmp_path_factory, small_corpus):
    root = tmp_path_factory.mktemp("own_parts")
    (root / "code").mkdir()
    (root / "code" / "my_parts.py").write_text(textwrap.dedent(MY_PARTS))
    for name, text in CONFIGS.items():
        (root / "conf" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "conf" / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": str(root / "code")}
    run_dir = root / "run"
    done = subprocess.run(
        [
            PYTHON,
            "scripts/train.py",
            "--config-dir",
            str(root / "conf"),
            *TINY_RUN,
            "data=textfile",
            f"data.path={small_corpus}",
            "custom_imports=[my_parts]",
            "model/position=shift",
            "model/mlp=relu2",
            "optim/schedule=halving",
            "logger=csv",
            f"hydra.run.dir={run_dir}",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    probe = (
        "from tinygpt.train.checkpoints import load_model; import sys;"
        "model, _, _ = load_model(sys.argv[1]);"
        "print(type(model.position_embedding).__name__, type(model.blocks[0].mlp).__name__)"
    )
    loaded = subprocess.run(
        [PYTHON, "-c", probe, str(run_dir / "checkpoints" / "last.ckpt")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return run_dir, loaded


def test_a_run_trains_with_a_position_an_mlp_and_a_schedule_of_its_own(own_parts):
    run_dir, _ = own_parts
    record = json.loads((run_dir / "run.json").read_text())
    assert record["status"] == "finished"
    model = record["config"]["model"]
    assert (model["position"], model["mlp"], record["config"]["optim"]["schedule"]) == ("shift", "relu2", "halving")
    assert record["config"]["custom_imports"] == ["my_parts"]
    with open(run_dir / "csv" / "metrics.csv") as handle:
        rates = [float(row["train/lr"]) for row in csv.DictReader(handle) if row.get("train/lr")]
    peak = record["config"]["optim"]["lr"]
    assert rates[-1] == pytest.approx(0.5 * peak)  # after the warmup the schedule of its own holds half the peak


def test_its_checkpoint_loads_in_a_process_that_imports_the_parts_from_the_checkpoint(own_parts):
    _, loaded = own_parts
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert loaded.stdout.split() == ["ShiftPositions", "ReLU2MLP"]


def test_a_module_that_is_not_there_fails_naming_the_field(tiny_cfg, tmp_path):
    with pytest.raises(ConfigError, match="custom_imports: no module 'not_my_parts' to import"):
        train(tiny_cfg("custom_imports=[not_my_parts]"), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_checkpoint_whose_parts_are_missing_says_which(own_parts, tmp_path):
    run_dir, _ = own_parts  # this process never imported my_parts, and its folder is not on sys.path
    with pytest.raises(CheckpointError, match="custom_imports: no module 'my_parts' to import"):
        load_model(run_dir / "checkpoints" / "last.ckpt")
