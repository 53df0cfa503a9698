"""hydra/launcher=slurm: the config composes into the sbatch script submitit would submit, and the same launcher
plugin, through submitit's local executor (hydra/launcher=submitit_local), requeues a preempted tiny run that
then resumes from its last.ckpt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import CONF, PYTHON, REPO, TINY_RUN
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf

pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="pip install -e .[slurm]")


def sbatch_script(tmp_path, monkeypatch, *overrides) -> str:
    """The sbatch file submitit writes for this config, built the way hydra-submitit-launcher's launch() builds
    its executor (no cluster needed: submitit only checks that srun exists)."""
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = compose("train", overrides=["hydra/launcher=slurm", *overrides], return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    try:
        params = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    finally:
        HydraConfig.instance().cfg = None
    assert params.pop("_target_").endswith("SlurmLauncher")
    fake_srun = tmp_path / "bin" / "srun"
    fake_srun.parent.mkdir()
    fake_srun.write_text("#!/bin/sh\n")
    fake_srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_srun.parent}{os.pathsep}{os.environ['PATH']}")
    executor = submitit.AutoExecutor(
        folder=tmp_path / "submitit", cluster="slurm", slurm_max_num_timeout=params.pop("max_num_timeout")
    )
    params.pop("submitit_folder")
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in params.items()})
    return executor._executor._make_submission_file_text("python -m submitit.core._submit", "uid")


def test_slurm_launcher_submits_one_gpu_job_per_run_with_time_limit_partition_and_requeue(tmp_path, monkeypatch):
    script = sbatch_script(tmp_path, monkeypatch, "hydra.launcher.partition=gpu", "hydra.launcher.timeout_min=90")
    for line in (
        "--partition=gpu",
        "--time=90",
        "--gpus-per-node=1",
        "--ntasks-per-node=1",
        "--requeue",
        "--signal=USR2@120",
    ):
        assert f"#SBATCH {line}\n" in script, line


def test_slurm_gives_a_ddp_run_one_task_per_device(tmp_path, monkeypatch):
    script = sbatch_script(tmp_path, monkeypatch, "trainer=ddp", "trainer.devices=4")
    assert "#SBATCH --gpus-per-node=4\n" in script and "#SBATCH --ntasks-per-node=4\n" in script


def submitit_task_pids(folder) -> list[int]:
    """Processes running a submitit task whose folder is under ``folder`` (Linux /proc)."""
    pids = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"submitit.core._submit" in argv and any(str(folder).encode() in arg for arg in argv):
            pids.append(int(cmdline.parent.name))
    return pids


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds the job's process through /proc")
@pytest.mark.slow
def test_a_preempted_job_is_requeued_and_resumes_from_last_ckpt(small_corpus, tmp_path):
    """The signal SLURM sends before preempting or timing out a job (USR2): submitit requeues the job, and the
    rerun continues from checkpoints/last.ckpt. The local executor requeues the same way SLURM does."""
    sweep = tmp_path / "sweep"
    steps = 600
    with open(tmp_path / "sweep.log", "w") as log:
        sweeping = subprocess.Popen(
            [
                PYTHON,
                "scripts/train.py",
                "-m",
                "hydra/launcher=submitit_local",
                "seed=0",
                *TINY_RUN,
                "data=textfile",
                f"data.path={small_corpus}",
                f"trainer.max_steps={steps}",
                "trainer.val_check_interval=300",
                "checkpoint.every_n_steps=20",
                "checkpoint.keep_every_n_steps=null",
                f"hydra.sweep.dir={sweep}",
            ],
            cwd=REPO,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline, signalled = time.monotonic() + 300, []
            while not signalled and time.monotonic() < deadline and sweeping.poll() is None:
                if list(sweep.glob("*/checkpoints/last.ckpt")):
                    for pid in submitit_task_pids(sweep):
                        os.kill(pid, signal.SIGUSR2)
                        signalled.append(pid)
                time.sleep(0.05)
            assert signalled, "the job finished or failed before it could be preempted"
            assert sweeping.wait(timeout=300) == 0, (tmp_path / "sweep.log").read_text()[-3000:]
        finally:
            if sweeping.poll() is None:
                os.killpg(sweeping.pid, signal.SIGKILL)
    logs = "".join(p.read_text() for p in sweep.glob(".submitit/*/*_log.*"))
    assert "this job is preempted" in logs and "Requeued job" in logs
    (record_path,) = sweep.glob("*/run.json")
    record = json.loads(record_path.read_text())
    assert record["status"] == "finished" and record["step"] == steps
    assert 0 < record["resumed_from_step"] < steps
    assert list(sweep.glob(".submitit/*/*_result.pkl"))  # the run went through a submitit job
    assert not list(sweep.glob("*/placement.json"))  # another launcher: no automatic placement
