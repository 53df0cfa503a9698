"""The bottom layer's helpers: atomic writes, eval-mode scopes, and the run folder's one reader and writer."""

from __future__ import annotations

import json

import pytest
import torch

from tinygpt.common.files import atomic_write, write_json_atomic
from tinygpt.common.modes import eval_mode
from tinygpt.common.run_folder import (
    append_evaluations,
    checkpoint_files,
    read_evaluations,
    read_record,
    write_record,
)
from tinygpt.metrics import LN2


def test_atomic_write_replaces_whole_or_not_at_all(tmp_path):
    path = tmp_path / "sub" / "run.json"
    write_json_atomic(path, {"a": 1, "x": torch.tensor(0.5).item()})
    assert json.loads(path.read_text()) == {"a": 1, "x": 0.5}
    with pytest.raises(RuntimeError), atomic_write(path) as file:
        file.write('{"a": 2')  # half written, then the writer fails
        raise RuntimeError("disk full")
    assert json.loads(path.read_text()) == {"a": 1, "x": 0.5}  # the old file is untouched
    assert sorted(p.name for p in path.parent.iterdir()) == ["run.json"]  # no temporary left behind
    with atomic_write(tmp_path / "w.bin", "wb") as file:
        torch.save({"w": torch.ones(2)}, file)
    assert torch.equal(torch.load(tmp_path / "w.bin", weights_only=True)["w"], torch.ones(2))
    with pytest.raises(ValueError, match="mode='a'"), atomic_write(tmp_path / "x", "a"):
        pass


@pytest.mark.parametrize("training", [True, False])
def test_eval_mode_switches_dropout_off_and_restores_the_mode_even_on_error(training):
    model = torch.nn.Sequential(torch.nn.Dropout(0.5))
    model.train(training)
    with eval_mode(model):
        assert not model.training and not model[0].training
        assert torch.equal(model(torch.ones(100)), torch.ones(100))  # no dropout inside
    assert model.training == training and model[0].training == training
    with pytest.raises(KeyError), eval_mode(model):
        raise KeyError("scoring failed")
    assert model.training == training
    with eval_mode(abs) as function:  # a plain function passes through
        assert function(-2) == 2


def test_ln2_converts_nats_to_bits():
    assert 8 * LN2 / LN2 == 8 and abs(LN2 - 0.6931471805599453) < 1e-15


def test_run_record_round_trip_and_old_field_names(tmp_path):
    assert read_record(tmp_path) is None
    write_record(tmp_path, {"best": {"step": 3, "dev_bits_per_byte": 1.5, "dev_loss": 1.0}, "curve": []})
    assert read_record(tmp_path)["best"] == {"step": 3, "dev_bits_per_byte": 1.5, "dev_loss": 1.0}
    (tmp_path / "run.json").write_text(json.dumps({"best": {"step": 3, "dev_bpb": 1.25, "dev_loss": 1.0}}))
    assert read_record(tmp_path)["best"] == {"step": 3, "dev_bits_per_byte": 1.25, "dev_loss": 1.0}


def test_checkpoints_in_step_order_then_last(tmp_path):
    assert checkpoint_files(tmp_path) == []
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for name in ("last.ckpt", "step000200.ckpt", "step000100.ckpt", "notes.txt"):
        (folder / name).write_text("")
    assert [p.name for p in checkpoint_files(tmp_path)] == ["step000100.ckpt", "step000200.ckpt", "last.ckpt"]


def test_evaluations_append_with_one_stamp_and_read_back_in_order(tmp_path):
    assert read_evaluations(tmp_path) == []
    append_evaluations(
        tmp_path, [{"split": "test", "bits_per_byte": 2.0}, {"split": "dev", "bits_per_byte": 1.0}], stamp="T0"
    )
    append_evaluations(tmp_path, [{"split": "test", "bits_per_byte": 1.5}])
    rows = read_evaluations(tmp_path)
    assert [r["bits_per_byte"] for r in rows] == [2.0, 1.0, 1.5]
    assert rows[0]["time"] == rows[1]["time"] == "T0" and rows[2]["time"] != "T0"
