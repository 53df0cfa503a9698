"""Every program answers bad input in one line: exit status 2, a single stderr line that names the field, file or
value, no traceback, and nothing written where it ran (tinygpt/cli/entry.py). Run as a user would: the console
programs, from an empty folder, on a tiny trained run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import TINY_RUN, compose_train

from tinygpt.train.run import train

pytestmark = pytest.mark.slow  # about twenty fresh processes

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def trained(tmp_path_factory, small_corpus) -> Path:
    """A finished tiny run: its folder."""
    run_dir = tmp_path_factory.mktemp("runs") / "model=tiny,seed=0"
    train(compose_train([*TINY_RUN, "data=textfile", f"data.path={small_corpus}"]), run_dir)
    return run_dir


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, trained) -> dict[str, Path]:
    """Bad inputs beside a good run: a checkpoint copied out of its run, a corrupt one, a non-UTF-8 file, a
    plain file to put a folder under, and a stand-in `transformers` that is not installed."""
    folder = tmp_path_factory.mktemp("inputs")
    shutil.copy(trained / "checkpoints" / "last.ckpt", folder / "loose.ckpt")
    (folder / "corrupt.ckpt").write_bytes(b"PK\x03\x04 not a checkpoint")
    torch.save({"layer": torch.nn.Linear(2, 2)}, folder / "objects.ckpt")  # a pickle of objects, not weights
    (folder / "notes.txt").write_text("not a checkpoint")
    (folder / "model=tiny,seed=0").mkdir()  # a run folder, for a mistyped name beside it
    (folder / "docs").mkdir()
    (folder / "docs" / "latin1.txt").write_bytes("caf\xe9 au lait, ".encode("latin-1") * 100)
    (folder / "a_file").write_text("x")
    return {"folder": folder, "run": trained, "ckpt": trained / "checkpoints" / "last.ckpt"}


# (program, arguments, what the one line must say); {folder}, {run} and {ckpt} are filled from `inputs`
CASES = [
    ("tinygpt-train", ["trainer.max_step=5"], "trainer.max_step: no such setting; did you mean trainer.max_steps?"),
    ("tinygpt-train", ["+trainer.max_step=5"], "trainer.max_step is not an argument of Lightning's Trainer; did you"),
    ("tinygpt-train", ["model=tny"], "model=tny: no such choice; did you mean model=tiny?"),
    ("tinygpt-train", ["model.dropot=0.1"], "model.dropot: no such setting; did you mean model.dropout?"),
    ("tinygpt-train", ["sede=3"], "sede: no such setting; did you mean seed? (the top level has: "),  # not ".seed"
    ("tinygpt-train", ["model.n_heads=5"], "n_heads"),
    ("tinygpt-train", ["data=textfile", "data.path=missing.txt"], "missing.txt (data.path=missing.txt) does not"),
    ("tinygpt-train", ["data=textdir", "data.path={folder}/docs"], "latin1.txt: not valid UTF-8 at byte offset 3"),
    ("tinygpt-train", ["data=textdir", "data.path={folder}/docs", "data.glob=*.md"], "data.glob='*.md' matches no"),
    ("tinygpt-train", ["-m", "data=textfile", "data.path=missing.txt", "seed=1,2"], "missing.txt"),
    ("tinygpt-train", ["hydra.run.dir={folder}/a_file/run"], "a_file/run: Not a directory"),
    # checked before the data is prepared or a folder made; mps: no Apple GPU on the machines this suite runs on
    ("tinygpt-train", ["trainer.precision=fp8"], "trainer.precision=fp8 is not allowed: must be auto or one of Light"),
    ("tinygpt-train", ["trainer.accelerator=mps"], "trainer.accelerator=mps is not available: this machine has no Ap"),
    ("tinygpt-train", ["progress.style=fancy"], "progress.style='fancy' is not allowed: must be one of auto"),
    ("tinygpt-train", ["callbacks.sample._target_=nowhere.Sampler"], "callbacks.sample (nowhere.Sampler): "),
    ("tinygpt-evaluate", ["ckpt={folder}/loose.ckpt"], "run.json not found: evaluate needs the run's record"),
    (
        "tinygpt-evaluate",
        ["run_dir=outputs/runs/x/model=tiny,seed=0"],
        "no checkpoints under outputs/runs/x/model=tiny",
    ),
    ("tinygpt-evaluate", ["{run}", "split=train"], "split"),
    # a mistyped run folder is a path, not an override Hydra cannot parse
    (
        "tinygpt-evaluate",
        ["{folder}/model=tiny,seed=9"],
        "model=tiny,seed=9: no such folder or file; the closest is {folder}/model=tiny,seed=0",
    ),
    ("tinygpt-export", ["{ckpt}", "out=/proc/x"], "out=/proc/x: cannot write a folder there"),  # not our temp path
    ("tinygpt-generate", ["ckpt=missing.ckpt"], "checkpoint not found: missing.ckpt"),
    ("tinygpt-generate", ["{folder}/corrupt.ckpt"], "corrupt.ckpt is unreadable (truncated or corrupt?)"),
    # torch's own message would advise weights_only=False, which runs the file's code
    ("tinygpt-generate", ["{folder}/objects.ckpt"], "objects.ckpt is not a tinygpt checkpoint: torch's weights-only"),
    ("tinygpt-generate", ["ckpt={folder}/notes.txt"], "notes.txt is not a tinygpt checkpoint (not a file torch.save"),
    ("tinygpt-generate", ["{folder}/docs"], "docs is a folder with no checkpoints/last.ckpt: give a checkpoint or a"),
    ("tinygpt-train", ["sample.top_p=1.5"], "sample.top_p=1.5 is not allowed: must be null or a number in (0, 1]"),
    ("tinygpt-generate", ["{ckpt}", "max_new_tokens=500"], "more than the model's context_length=32"),
    ("tinygpt-generate", ["{ckpt}", "temperature=0"], "temperature=0"),
    ("tinygpt-generate", ["{ckpt}", "beams=3", "top_k=5"], "beams=3 searches for the likeliest continuation and"),
    ("tinygpt-analyze", ["run_dir=nowhere"], "nowhere"),
    ("tinygpt-params", ["model=tny"], "model=tny: no such choice; did you mean model=tiny?"),
    ("tinygpt-baselines", ["data=textfile", "data.path=missing.txt"], "missing.txt"),
    ("tinygpt-import-hf", ["hf=nowhere", "out=imported"], "nowhere"),
    ("tinygpt-report", ["nowhere"], "nowhere"),
    ("tinygpt-register", ["nowhere", "name=x", "--package"], "nowhere"),
]


@pytest.mark.parametrize(("program", "arguments", "said"), CASES, ids=[f"{c[0]} {' '.join(c[1])}" for c in CASES])
def test_every_program_refuses_bad_input_in_one_line_and_writes_nothing(tmp_path, inputs, program, arguments, said):
    where = tmp_path / "empty"
    where.mkdir()
    fill = {name: str(path) for name, path in inputs.items()}
    env = dict(os.environ)
    env.pop("HYDRA_FULL_ERROR", None)
    done = subprocess.run(
        [str(BIN / program), *(a.format(**fill) for a in arguments)],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert lines[0].startswith(("[tinygpt] error: ", "[tinygpt] refused: ")), lines[0]
    assert said.format(**fill) in lines[0], lines[0]
    assert list(where.iterdir()) == []  # no run folder, no outputs/, no log
    assert not (inputs["folder"] / "a_file.run").exists()


def test_export_without_transformers_names_the_extra(inputs, tmp_path, monkeypatch, capsys):
    """As after `pip install tinygpt` without [hf]: the import fails inside the program, which says what to install
    (the extra is read from tinygpt's metadata) and writes nothing. (In a subprocess, torchmetrics would import the
    installed transformers first, so this one runs in-process.)"""
    from tinygpt.cli import export

    monkeypatch.setitem(sys.modules, "transformers", None)  # `import transformers` now fails as if not installed
    monkeypatch.setitem(sys.modules, "transformers.utils", None)
    monkeypatch.setattr(sys, "argv", ["tinygpt-export", str(inputs["ckpt"]), f"out={tmp_path / 'hf'}"])
    with pytest.raises(SystemExit) as stopped:
        export.main()
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "[tinygpt] error: tinygpt-export needs transformers: pip install 'tinygpt[hf]'"
    )
    assert not (tmp_path / "hf").exists()


def test_help_lists_each_groups_choices_and_no_schema(tmp_path):
    done = subprocess.run([str(BIN / "tinygpt-train"), "--help"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    groups = dict(line.split(": ", 1) for line in done.stdout.split("\n\n")[2].splitlines())
    assert groups["model"] == "blog, gpt2_124m, llama3_8b, lstm, qwen3_0_6b, since_gpt2, tiny"
    assert groups["optim"] == "adamw" and groups["model/position"] == "alibi, learned, none, rope, sinusoidal"
    assert "schema" not in done.stdout.split("== Config ==")[0] and "tools" not in groups


@pytest.mark.parametrize(
    ("program", "keys"),
    [
        ("tinygpt-generate", ["ckpt", "prompt", "top_p", "greedy", "beams"]),
        ("tinygpt-evaluate", ["run_dir", "split"]),
        ("tinygpt-lm-eval", ["ckpt", "tasks", "limit", "batch_size", "include_path"]),
    ],
)
def test_a_tools_help_lists_the_keys_it_takes_not_the_training_groups(tmp_path, program, keys):
    done = subprocess.run([str(BIN / program), "--help"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    listed = [line.split(":")[0] for line in done.stdout.split("== Keys ==")[1].splitlines() if ":" in line]
    assert set(keys) <= set(listed)
    for group in ("schema", "lstm_schema", "tools", "ablation", "model/position", "Configuration groups"):
        assert group not in done.stdout, group


def test_a_missing_path_is_not_called_unwritable_and_an_unwritable_one_is():
    """The one line for an OSError naming a path: a missing file (read, or a folder to write into) says it does
    not exist; a permission or type problem says it cannot be written."""
    from tinygpt.cli.entry import line_for

    missing = line_for(FileNotFoundError(2, "No such file or directory", "/data/book.txt"))
    assert missing.startswith("/data/book.txt: No such file or directory") and "cannot write" not in missing
    denied = line_for(PermissionError(13, "Permission denied", "/outputs/run"))
    assert denied.startswith("cannot write /outputs/run: Permission denied; choose a folder you can write")


@pytest.mark.parametrize(
    ("arguments", "error"),
    [(["model.n_heads=5"], "ConfigError: GPTConfig.n_heads=5"), (["data=textfile", "data.path=no.txt"], "DataError")],
)
def test_hydra_full_error_gives_the_traceback_as_docs_runs_promises(tmp_path, arguments, error):
    """HYDRA_FULL_ERROR=1 (Hydra's own switch, docs/runs.md): the whole traceback as well as the line, and still
    nothing written (the settings' and the data's checks alike)."""
    env = {**os.environ, "HYDRA_FULL_ERROR": "1"}
    done = subprocess.run(
        [str(BIN / "tinygpt-train"), *arguments], cwd=tmp_path, capture_output=True, text=True, env=env
    )
    assert done.returncode != 0
    assert "Traceback (most recent call last)" in done.stderr and error in done.stderr
    assert len(done.stderr.strip().splitlines()) > 5
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["model/position=rope,rop"], "model/position=rop: In 'model/tiny': Could not find 'model/position/rop'"),
        (["optim.grad_clip=-1", "seed=0,1"], "optim.grad_clip=-1.0 is not allowed: must be a non-negative number"),
    ],
)
def test_a_sweep_checks_every_job_before_it_writes_anything(tmp_path, small_corpus, arguments, said):
    """A misspelt choice or a bad value in any job: one line, and an earlier sweep's folder left as it was."""
    sweep = tmp_path / "outputs" / "sweeps" / "smoke"
    sweep.mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("an earlier sweep's\n")
    env = {k: v for k, v in os.environ.items() if k != "HYDRA_FULL_ERROR"}
    done = subprocess.run(
        [
            str(BIN / "tinygpt-train"),
            "-m",
            "experiment=smoke",
            "data=textfile",
            f"data.path={small_corpus}",
            *arguments,
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr[-2000:]
    assert done.stderr.startswith("[tinygpt] error: sweep job experiment=smoke ") and said in done.stderr
    assert "nothing of the sweep was written" in done.stderr
    assert "Launching" not in done.stdout + done.stderr
    assert [p.name for p in sweep.iterdir()] == ["multirun.yaml"]
    assert (sweep / "multirun.yaml").read_text() == "an earlier sweep's\n"


def test_lm_eval_without_the_harness_names_the_extra(inputs, tmp_path, monkeypatch, capsys):
    """As after `pip install tinygpt` without [lm-eval]: one line with the pip command, nothing written."""
    from tinygpt.cli import lm_eval

    monkeypatch.setitem(sys.modules, "lm_eval", None)  # `import lm_eval` now fails as if not installed
    monkeypatch.setattr(sys, "argv", ["tinygpt-lm-eval", str(inputs["run"]), "tasks=hellaswag"])
    with pytest.raises(SystemExit) as stopped:
        lm_eval.main()
    assert stopped.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "[tinygpt] error: tinygpt-lm-eval needs lm-eval: pip install 'tinygpt[lm-eval]'"
    )
    assert not (inputs["run"] / "lm_eval").exists()
