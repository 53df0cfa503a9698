"""Device leases and the placement callback, in-process and fast: exclusivity, release on crash, threads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import pytest
import torch
from conftest import CONF, PYTHON, REPO
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.types import RunMode
from omegaconf import OmegaConf

from tinygpt.launch import placement
from tinygpt.launch.devices import cpu_cores, device_pool, is_device_list, parallel_jobs, requested_devices
from tinygpt.launch.leases import acquire, try_acquire
from tinygpt.train.preflight import without_hydra
from tinygpt.train.schema import parse_run_config


def test_leases_are_exclusive_and_go_to_the_lowest_free_device(tmp_path):
    names = ["dev-0", "dev-1"]
    first, second = try_acquire(tmp_path, names), try_acquire(tmp_path, names)
    assert (first.index, second.index) == (0, 1)
    assert try_acquire(tmp_path, names) is None  # both held: nobody else gets one
    first.release()
    again = try_acquire(tmp_path, names)
    assert again.index == 0 and try_acquire(tmp_path, names) is None
    again.release()
    second.release()


def test_a_killed_holders_device_is_leased_again(tmp_path):
    """The OS drops a dead process's lock: a job killed with SIGKILL (no cleanup at all) frees its device."""
    holder = subprocess.Popen(
        [
            PYTHON,
            "-c",
            "import sys, time; from tinygpt.launch.leases import try_acquire; "
            f"lease = try_acquire({str(tmp_path)!r}, ['dev-0']); print(lease.index, flush=True); "
            "time.sleep(60)",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "0"
        assert try_acquire(tmp_path, ["dev-0"]) is None
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    lease = try_acquire(tmp_path, ["dev-0"])
    assert lease is not None and lease.index == 0
    lease.release()


def test_acquire_waits_until_a_device_is_released_and_can_time_out(tmp_path):
    held = try_acquire(tmp_path, ["dev-0"])
    with pytest.raises(TimeoutError):
        acquire(tmp_path, ["dev-0"], poll_s=0.02, timeout_s=0.1)
    waits = []
    threading.Timer(0.2, held.release).start()
    started = time.monotonic()
    lease = acquire(tmp_path, ["dev-0"], poll_s=0.02, timeout_s=10, on_wait=lambda: waits.append(1))
    assert lease.index == 0 and waits == [1] and time.monotonic() - started >= 0.15
    lease.release()


def test_device_counts_in_lightning_notation():
    assert [requested_devices(d) for d in (1, 2, -1, "auto", "3", "0,1", [2], [0, 1])] == [1, 2, None, None, 3, 2, 1, 2]
    assert [is_device_list(d) for d in (1, "2", "1,", [0])] == [False, False, True, True]
    assert device_pool("cpu", 3).names == ("cpu-0", "cpu-1", "cpu-2")
    assert device_pool("auto", 1, simulate_devices=4).kind == "simulated" and parallel_jobs("auto", 1, 4) == 4
    with pytest.raises(ValueError, match="cpu_jobs"):
        device_pool("cpu", 0)


def compose_with_hydra(*overrides):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("train", overrides=["experiment=smoke", *overrides], return_hydra_config=True)


def test_gpus_are_leased_by_their_physical_ids(monkeypatch):
    """With 3 visible GPUs the pool is the GPUs (K jobs at a time), named after CUDA_VISIBLE_DEVICES so that two
    sweeps given different GPUs never wait for each other; trainer.accelerator=cpu still gets CPU slots."""
    monkeypatch.setattr("tinygpt.launch.devices.cuda_device_count", lambda: 3)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5,7")
    pool = device_pool("auto", cpu_jobs=1)
    assert (pool.kind, pool.names) == ("cuda", ("cuda-2", "cuda-5", "cuda-7"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert device_pool("gpu", cpu_jobs=1).names == ("cuda-0", "cuda-1", "cuda-2")
    assert device_pool("cpu", cpu_jobs=2).kind == "cpu" and parallel_jobs("auto", 1) == 3


def test_placement_launcher_runs_one_job_per_device_by_default():
    def n_jobs(*overrides):
        cfg = compose_with_hydra(*overrides)
        return cfg.hydra.launcher.n_jobs, cfg.hydra.runtime.choices["hydra/launcher"]

    gpus = torch.cuda.device_count()
    assert n_jobs() == ((gpus or 1), "placement")
    assert n_jobs("trainer.accelerator=cpu", "sweep.cpu_jobs=2") == (2, "placement")
    assert n_jobs("sweep.simulate_devices=3") == (3, "placement")
    assert n_jobs("sweep.simulate_devices=3", "sweep.jobs_per_device=4") == (12, "placement")


def job_config(tmp_path, *, launcher="placement", mode=RunMode.MULTIRUN, devices=1, n_jobs=2, simulate=2):
    """The parts of a job's full config that DevicePlacement reads."""
    return OmegaConf.create(
        {
            "hydra": {
                "mode": mode,
                "runtime": {"choices": {"hydra/launcher": launcher}, "output_dir": str(tmp_path)},
                "launcher": {"n_jobs": n_jobs},
            },
            "trainer": {"devices": devices, "accelerator": "auto"},
            "sweep": {
                "cpu_jobs": 1,
                "jobs_per_device": 1,
                "simulate_devices": simulate,
                "lease_dir": str(tmp_path / "leases"),
            },
            "resume": "auto",
            "ckpt_path": None,
        }
    )


def test_callback_leases_a_device_divides_threads_and_releases_after_a_failed_job(tmp_path, restore_threads):
    config = job_config(tmp_path)
    callback = placement.DevicePlacement()
    callback.on_job_start(config, task_function=None)
    held = placement.current()
    assert held is not None and held.lease.name == "sim-0"
    assert torch.get_num_threads() == max(1, cpu_cores() // 2)
    record = json.loads((tmp_path / "placement.json").read_text())
    assert record["device"] == "sim-0" and record["released_at"] is None and record["pid"] == os.getpid()
    assert try_acquire(tmp_path / "leases", ["sim-0"]) is None  # held for the job's lifetime

    failed = JobReturn()
    failed.status, failed.return_value = JobStatus.FAILED, ValueError("crashed")
    callback.on_job_end(config, job_return=failed)
    assert placement.current() is None and torch.get_num_threads() == restore_threads
    assert json.loads((tmp_path / "placement.json").read_text())["released_at"] is not None
    callback.on_job_start(config, task_function=None)  # the next job gets the crashed job's device
    assert placement.current().lease.name == "sim-0"
    callback.on_job_end(config, job_return=None)


def test_a_finished_job_a_rerun_skips_leases_nothing_and_keeps_its_placement_record(tmp_path, restore_threads):
    (tmp_path / "run.json").write_text(json.dumps({"status": "finished"}))
    (tmp_path / "placement.json").write_text('{"device": "where it trained"}')
    callback = placement.DevicePlacement()
    callback.on_job_start(job_config(tmp_path), task_function=None)
    assert placement.current() is None and torch.get_num_threads() == restore_threads
    other = try_acquire(tmp_path / "leases", ["sim-0"])
    assert other is not None  # the first device was left free
    callback.on_job_end(job_config(tmp_path), job_return=None)
    assert json.loads((tmp_path / "placement.json").read_text()) == {"device": "where it trained"}
    # resume=never trains it again (or refuses to), so that job is placed as any other
    retrain = job_config(tmp_path)
    retrain.resume = "never"
    callback.on_job_start(retrain, task_function=None)
    assert placement.current().lease.name == "sim-1"  # sim-0 is held by the try_acquire above
    callback.on_job_end(retrain, job_return=None)
    assert json.loads((tmp_path / "placement.json").read_text())["device"] == "sim-1"
    other.release()


@pytest.mark.parametrize("change", [{"launcher": "basic"}, {"mode": RunMode.RUN}, {"devices": [1]}, {"devices": 2}])
def test_placement_leaves_other_launchers_single_runs_and_explicit_devices_alone(tmp_path, change, restore_threads):
    config = job_config(tmp_path, **change)
    placement.DevicePlacement().on_job_start(config, task_function=None)
    assert placement.current() is None and not (tmp_path / "placement.json").exists()
    assert torch.get_num_threads() == restore_threads


@pytest.fixture
def hydra_job():
    """Makes HydraConfig look like that of a multirun job (under the placement launcher unless overridden)."""

    def start(*overrides):
        cfg = compose_with_hydra(*overrides)
        cfg.hydra.mode = RunMode.MULTIRUN
        HydraConfig.instance().set_config(cfg)
        return parse_run_config(without_hydra(cfg))  # the task's config, as train() reads it

    yield start
    HydraConfig.instance().cfg = None
    placement._current, placement._skipping = None, False


def test_apply_placement_pins_the_leased_gpu(hydra_job, tmp_path):
    cfg = hydra_job()
    lease = try_acquire(tmp_path, ["cuda-0", "cuda-1", "cuda-2"])
    lease.index = 2  # as if GPUs 0 and 1 were taken by other jobs
    placement._current = placement.Placement(lease, "cuda", 2, 1, 1, tmp_path / "placement.json", {})
    pinned = placement.apply_placement(cfg)
    assert list(pinned.trainer["devices"]) == [2] and cfg.trainer["devices"] == 1
    lease.release()


def test_jobs_per_device_packs_k_leases_on_each_device_spread_before_doubled(tmp_path, monkeypatch):
    """Two GPUs, 3 jobs each: six leases, slot by slot, so the first two jobs go to different GPUs; each lease
    maps back to its GPU, and a crashed job's slot comes back to the next job."""
    monkeypatch.setattr("tinygpt.launch.devices.cuda_device_count", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    pool = device_pool("auto", cpu_jobs=1, jobs_per_device=3)
    assert pool.names == (
        "cuda-0.slot0",
        "cuda-1.slot0",
        "cuda-0.slot1",
        "cuda-1.slot1",
        "cuda-0.slot2",
        "cuda-1.slot2",
    )
    assert parallel_jobs("auto", 1, None, 3) == 6 and device_pool("auto", 1).names == ("cuda-0", "cuda-1")
    leases = [try_acquire(tmp_path, pool.names) for _ in range(6)]
    assert [pool.device_of(lease.index) for lease in leases] == [0, 1, 0, 1, 0, 1]
    assert [pool.slot_of(lease.index) for lease in leases] == [0, 0, 1, 1, 2, 2]
    assert try_acquire(tmp_path, pool.names) is None  # six jobs at a time, no seventh
    leases[3].release()  # a job on GPU 1 ends (or crashes): its slot is the next job's
    again = try_acquire(tmp_path, pool.names)
    assert (pool.device_of(again.index), pool.slot_of(again.index)) == (1, 1)
    for lease in [*leases[:3], *leases[4:], again]:
        lease.release()
    assert device_pool("cpu", 2, jobs_per_device=3).names == ("cpu-0", "cpu-1")  # CPU slots are cpu_jobs
    with pytest.raises(ValueError, match="sweep.jobs_per_device=0"):
        device_pool("auto", 1, jobs_per_device=0)


def test_a_packed_jobs_placement_names_its_device_and_slot_and_pins_that_gpu(hydra_job, tmp_path, restore_threads):
    config = job_config(tmp_path, n_jobs=4, simulate=2)
    config.sweep.jobs_per_device = 2
    callbacks = []
    for _ in range(3):  # three jobs of one process each: simulate them with three leases held at once
        placement.place(config)
        callbacks.append(placement._current)
        placement._current = None
    records = [held.record for held in callbacks]
    assert [(r["device"], r["slot"], r["jobs_per_device"]) for r in records] == [
        ("sim-0", 0, 2),
        ("sim-1", 0, 2),
        ("sim-0", 1, 2),
    ]
    assert records[0]["pool"] == ["sim-0", "sim-1"] and records[0]["torch_threads"] == max(1, cpu_cores() // 4)
    for held in callbacks:
        held.lease.release()
    cfg = hydra_job()
    lease = try_acquire(tmp_path / "gpu", ["cuda-0.slot0", "cuda-1.slot0", "cuda-0.slot1", "cuda-1.slot1"])
    lease.index = 2  # cuda-0's second slot
    placement._current = placement.Placement(lease, "cuda", 0, 1, 1, tmp_path / "placement.json", {})
    assert list(placement.apply_placement(cfg).trainer["devices"]) == [0]
    lease.release()


def test_apply_placement_fails_a_job_placement_could_not_lease_a_device(hydra_job):
    cfg = hydra_job()
    with pytest.raises(RuntimeError, match="no device lease"):
        placement.apply_placement(cfg)
    assert placement.apply_placement(hydra_job("hydra/launcher=basic")) is not None
    cfg = hydra_job()  # the placement launcher again
    placement._skipping = True  # a finished job being skipped leased nothing on purpose
    assert placement.apply_placement(cfg) is cfg


def test_multi_device_jobs_are_refused_inside_a_multirun(hydra_job):
    with pytest.raises(ValueError, match="#11300"):
        placement.apply_placement(hydra_job("trainer=ddp", "hydra/launcher=basic"))


def test_multi_device_jobs_may_run_in_a_sweep_where_slurm_starts_one_task_per_device(hydra_job, monkeypatch):
    monkeypatch.setenv("SLURM_NTASKS", "2")
    monkeypatch.setenv("SLURM_JOB_NAME", "train")
    cfg = hydra_job("trainer=ddp", "hydra/launcher=slurm")
    assert placement.apply_placement(cfg).trainer["devices"] == 2
    monkeypatch.setenv("SLURM_NTASKS", "1")  # one task for two devices: Lightning would start the other
    with pytest.raises(ValueError, match="#11300"):
        placement.apply_placement(cfg)


def test_lease_dir_follows_the_environment(monkeypatch, tmp_path):
    from conftest import compose_train

    monkeypatch.setenv("TINYGPT_LEASE_DIR", str(tmp_path / "mine"))
    assert compose_train([]).sweep.lease_dir == str(tmp_path / "mine")
    assert compose_train(["sweep.lease_dir=/elsewhere"]).sweep.lease_dir == "/elsewhere"
    monkeypatch.delenv("TINYGPT_LEASE_DIR")
    assert compose_train([]).sweep.lease_dir is None  # the machine-wide default folder


def test_a_mac_sweep_packs_its_jobs_on_the_one_mps_device(hydra_job, tmp_path, monkeypatch):
    """No CUDA, Apple's GPU available: one MPS device, k leases on it; a leased job trains on mps; an explicit
    trainer.accelerator=cpu still gets CPU slots."""
    monkeypatch.setattr("tinygpt.launch.devices.cuda_device_count", lambda: 0)
    monkeypatch.setattr("tinygpt.launch.devices.mps_available", lambda: True)
    pool = device_pool("auto", cpu_jobs=1, jobs_per_device=4)
    assert (pool.kind, pool.devices, len(pool)) == ("mps", ("mps-0",), 4)
    assert parallel_jobs("auto", 1, None, 4) == 4 and device_pool("cpu", 2).kind == "cpu"
    lease = try_acquire(tmp_path, pool.names)
    placement._current = placement.Placement(lease, "mps", 0, 1, 1, tmp_path / "placement.json", {})
    pinned = placement.apply_placement(hydra_job())
    assert (pinned.trainer["accelerator"], pinned.trainer["devices"]) == ("mps", 1)
    lease.release()
