"""tinygpt as a user installs it: a wheel built from this tree (offline, no build isolation), installed into a fresh
virtual environment that borrows this environment's packages but not its editable tinygpt, and its console
commands run from an empty folder: a single run, a two-job multirun placed on the machine's devices, an
experiment and a preset from a config folder of the user's own. Each job's train.log holds its console lines."""

from __future__ import annotations

import json
import shlex
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The fresh venv's bin/ folder, with the wheel of this tree installed in it."""
    base = tmp_path_factory.mktemp("install")
    # the files a clone has (tracked, or new and not ignored), so no build/ folder of an earlier build leaks in
    listed = subprocess.check_output(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, text=True)
    source = base / "source"
    for name in listed.splitlines():
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    wheels = base / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            wheels,
            source,
        ],
        check=True,
        timeout=600,
        capture_output=True,
    )
    [wheel] = wheels.glob("tinygpt-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=300)
    bin_dir = venv / "bin"
    subprocess.run(
        [bin_dir / "pip", "install", "-q", "--no-deps", "--no-index", "--disable-pip-version-check", wheel],
        check=True,
        timeout=300,
    )
    # this environment's packages (torch, lightning, hydra, ...) as a plain path: its .pth files, among them the
    # editable install of this checkout, are not processed there, so tinygpt comes from the wheel
    purelib = Path(
        subprocess.check_output(
            [bin_dir / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    borrowed = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    (purelib / "borrowed_packages.pth").write_text("\n".join(dict.fromkeys(borrowed)) + "\n")
    return bin_dir


def run(command: list, cwd: Path, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)} | (env_extra or {})
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def test_the_wheel_carries_its_configs_and_trains_from_an_empty_folder(installed, tmp_path, small_corpus):
    probe = (
        "import sys, tinygpt, tinygpt.cli; from hydra.core.plugins import Plugins; from hydra.plugins.sweeper import "
        "Sweeper; print(tinygpt.__file__, tinygpt.cli.CONF, *(sys.modules[c.__module__].__file__ for c in "
        "Plugins.instance().discover(Sweeper) if 'tinygpt' in c.__module__))"
    )
    where = run([installed / "python", "-c", probe], tmp_path)
    package, conf, *sweepers = where.stdout.split()
    assert package.startswith(str(installed.parent)) and Path(conf, "train.yaml").is_file(), where.stdout
    # the wheel's own copy of the checkout's conf/ (pyproject maps it onto tinygpt/conf), every file of it
    assert Path(conf) == Path(package).parent / "conf", where.stdout
    carried = sorted(p.relative_to(conf).as_posix() for p in Path(conf).rglob("*.yaml"))
    assert carried == sorted(p.relative_to(REPO / "conf").as_posix() for p in (REPO / "conf").rglob("*.yaml"))
    # the search's sweeper travels in the wheel, where Hydra looks for plugins (-m hparams_search=...)
    assert [Path(s).relative_to(installed.parent).parts[-3:] for s in sweepers] == [
        ("hydra_plugins", "tinygpt_search", "search_sweeper.py")
    ], where.stdout
    data = ["data=textfile", f"data.path={small_corpus}"]
    done = run(
        [installed / "tinygpt-train", "experiment=smoke", "trainer.max_steps=2", "trainer.val_check_interval=2", *data],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [record] = tmp_path.glob("outputs/runs/smoke/*/run.json")
    assert json.loads(record.read_text())["status"] == "finished"
    log = (record.parent / "train.log").read_text()
    assert "[tinygpt][INFO] - model: " in log and "[tinygpt][INFO] - dev bits per byte at step 2:" in log
    assert "`Trainer.fit` stopped: `max_steps=2` reached." in log  # Lightning's own lines too
    # the commands the run ends with are pasted as printed: the run folder's = and , need no quoting
    pasted = done.stdout.split("\nnext:\n", 1)[1].splitlines()
    commands = [shlex.split(line.split("  #")[0]) for line in pasted if line.strip().startswith("tinygpt-")]
    assert [c[0] for c in commands] == ["tinygpt-evaluate", "tinygpt-generate", "tinygpt-export"]
    for program, *arguments in commands:
        followed = run([installed / program, *arguments], tmp_path, {"HF_HUB_OFFLINE": "1"})
        assert followed.returncode == 0, (program, followed.stderr[-3000:])
    assert (tmp_path / "outputs" / "hf" / record.parent.name / "config.json").is_file()


def test_an_installed_multirun_places_its_two_jobs_and_each_logs_its_lines(installed, tmp_path, small_corpus):
    data = ["data=textfile", f"data.path={small_corpus}"]
    done = run(
        [
            installed / "tinygpt-train",
            "-m",
            "experiment=smoke",
            "trainer.max_steps=2",
            "trainer.val_check_interval=2",
            "seed=0,1",
            *data,
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = sorted(p.parent for p in tmp_path.glob("outputs/sweeps/smoke/*/run.json"))
    assert len(jobs) == 2
    for job in jobs:
        assert json.loads((job / "placement.json").read_text())["kind"] == "cpu"
        log = (job / "train.log").read_text()
        assert "[tinygpt][INFO] - placement: " in log and "[tinygpt][INFO] - dev bits per byte at step 2:" in log
    # the sweep's report, as each job's next steps print it
    [report] = {line.split("  #")[0].strip() for line in done.stdout.splitlines() if "  tinygpt-report " in line}
    program, *arguments = shlex.split(report)
    reported = run([installed / program, *arguments], tmp_path)
    assert reported.returncode == 0, reported.stderr[-3000:]
    assert (tmp_path / "outputs" / "sweeps" / "smoke" / "report.md").is_file()


def test_the_python_api_from_the_wheel(installed, tmp_path, small_corpus):
    script = (
        "from tinygpt.api import compose, generate, load, train\n"
        f"cfg = compose(['experiment=smoke', 'data=textfile', 'data.path={small_corpus}'])\n"
        "record = train(cfg, 'runs/demo')\n"
        "model, tokenizer = load('runs/demo/checkpoints/last.ckpt')\n"
        "print(record['status'], len(generate(model, tokenizer, 'the', max_new_tokens=5, seed=0)))\n"
    )
    done = run([installed / "python", "-c", script], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "finished 8"
    assert "`Trainer.fit` stopped" in (tmp_path / "runs" / "demo" / "train.log").read_text()


def test_an_experiment_and_a_preset_from_the_users_own_folder(installed, tmp_path, small_corpus):
    data = ["data=textfile", f"data.path={small_corpus}"]
    done = run(
        [
            installed / "tinygpt-train",
            "--config-dir",
            REPO / "examples" / "my_conf",
            "experiment=mine",
            "trainer.max_steps=2",
            "trainer.val_check_interval=2",
            "data.batch_size=2",
            *data,
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [record] = tmp_path.glob("outputs/runs/mine/*/run.json")
    config = json.loads(record.read_text())["config"]
    assert (config["model"]["d_model"], config["model"]["n_layers"], config["optim"]["schedule"]) == (256, 2, "cosine")
    # a preset of one's own is checked against the schema: tests/test_python_api.py composes one with a typo
