"""sweep.jobs_per_device=auto: the footprint estimate against a peak measured on the CPU, the choice of k from
free memory and CPU cores (probes faked), the plan made once per multirun and read by the launcher's n_jobs and
by every job's lease, and the refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tinygpt.cli import CONF
from tinygpt.launch import packing, placement
from tinygpt.launch.devices import DevicePool
from tinygpt.launch.footprint import CUDA_CONTEXT, GIB, estimate
from tinygpt.launch.resolvers import placement_jobs
from tinygpt.model import GPTConfig
from tinygpt.train.schema import SweepConfig

PROBE = Path(__file__).with_name("footprint_probe.py")
# three shapes whose peaks come from different terms: attention dropout's written-out softmax (003's layout), a
# GELU MLP, and a GPT-2-sized vocabulary whose loss and head dominate
SHAPES = [
    ({"vocab_size": 148, "context_length": 128, "d_model": 128, "n_layers": 4, "n_heads": 4, "dropout": 0.2}, "int16"),
    (
        {"vocab_size": 2048, "context_length": 128, "d_model": 128, "n_layers": 4, "n_heads": 4, "mlp": "gelu"},
        "torch",
    ),
    (
        {
            "vocab_size": 50257,
            "context_length": 64,
            "d_model": 64,
            "n_layers": 1,
            "n_heads": 4,
            "dropout": 0.1,
            "position": "learned",
            "norm": "layernorm",
            "mlp": "gelu",
        },
        "torch",
    ),
]
BATCH = 8


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the probe reads Linux's /proc/self/status")
def test_the_footprint_estimate_is_an_upper_bound_within_1_5x_of_a_measured_cpu_peak():
    tiny = {"vocab_size": 16, "context_length": 8, "d_model": 16, "n_layers": 1, "n_heads": 1}
    jobs = [(tiny, 1, {"malloc": "system"})] + [
        (model, BATCH, {"dropout": masks, "malloc": "system"}) for model, masks in SHAPES
    ]
    done = subprocess.run([sys.executable, str(PROBE), json.dumps(jobs)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    measured = json.loads(done.stdout)
    for (model, masks), peak in zip(SHAPES, measured, strict=True):
        config = GPTConfig(**model)
        written_out = masks == "int16" and config.dropout > 0
        predicted = estimate(config, BATCH, "32-true", "cpu", written_out_attention=written_out)
        assert predicted.context == 0  # a CPU process has no device context
        assert 1.0 <= predicted.total / peak <= 1.5, (model, predicted.describe(), peak)


def blog_config(*overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("train", overrides=["experiment=blog", *overrides], return_hydra_config=True)


def test_k_is_the_smaller_of_the_memory_and_the_core_bounds(monkeypatch):
    cfg = blog_config()
    pool = DevicePool("cuda", ("cuda-0", "cuda-1"))
    footprint, shape = packing.job_footprint(cfg, "cuda")
    assert footprint.context == CUDA_CONTEXT and "mixed precision" in shape and "at most 256 characters" in shape
    free = {0: 40 * GIB, 1: 10 * GIB}  # the least free device decides
    monkeypatch.setattr(packing, "free_memory", lambda kind, index: free[index])
    monkeypatch.setattr(packing, "cpu_cores", lambda: 64)
    plan = packing.decide(cfg, pool)
    by_memory = int(10 * GIB * packing.USABLE // footprint.total)
    assert plan["by_memory"] == by_memory and plan["by_cores"] == 32
    assert plan["jobs_per_device"] == min(by_memory, 32) and plan["why"].startswith(
        f"sweep.jobs_per_device=auto: {min(by_memory, 32)} job(s) per cuda device"
    )
    monkeypatch.setattr(packing, "cpu_cores", lambda: 6)  # 3 cores per device bind before memory
    assert packing.decide(cfg, pool)["jobs_per_device"] == 3
    monkeypatch.setattr(packing, "free_memory", lambda kind, index: footprint.total // 2)
    tight = packing.decide(cfg, pool)
    assert tight["jobs_per_device"] == 1 and "exceeds the free memory" in tight["why"]
    assert packing.decide(cfg, DevicePool("cpu", ("cpu-0",)))["jobs_per_device"] == 1


def test_a_larger_job_gets_fewer_slots(monkeypatch):
    monkeypatch.setattr(packing, "free_memory", lambda kind, index: 8 * GIB)
    monkeypatch.setattr(packing, "cpu_cores", lambda: 1024)
    pool = DevicePool("cuda", ("cuda-0",))
    small = packing.decide(blog_config(), pool)["jobs_per_device"]
    large = packing.decide(blog_config("data.batch_size=128"), pool)["jobs_per_device"]
    assert small > large >= 1


def test_the_plan_is_made_once_per_multirun_and_read_by_n_jobs_and_every_lease(monkeypatch, tmp_path, restore_threads):
    sweep_dir = tmp_path / "sweep"
    cfg = blog_config(
        "sweep.jobs_per_device=auto",
        "sweep.simulate_devices=2",
        f"hydra.sweep.dir={sweep_dir}",
        f"sweep.lease_dir={tmp_path / 'leases'}",
    )
    monkeypatch.setattr(packing, "free_memory", lambda kind, index: 4 * GIB)
    monkeypatch.setattr(packing, "cpu_cores", lambda: 6)  # 3 per simulated device
    placement.DevicePlacement().on_multirun_start(cfg)
    plan = json.loads((sweep_dir / packing.PLAN).read_text())
    assert plan["jobs_per_device"] == 3
    # the launcher's n_jobs: 2 devices x 3 (as the resolver in conf/hydra/launcher/placement.yaml computes it)
    assert cfg.hydra.launcher.n_jobs == 6 == placement_jobs("auto", 1, 2, "auto", str(sweep_dir))
    # a job leases from the same pool, whatever the free memory is by then
    monkeypatch.setattr(packing, "free_memory", lambda kind, index: 1)
    job = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    job.hydra.runtime.output_dir = str(tmp_path / "job0")
    job.hydra.launcher.n_jobs = 6
    held = placement.place(job)
    try:
        assert (held.record["jobs_per_device"], held.record["pool"]) == (3, ["sim-0", "sim-1"])
    finally:
        placement.release()
    # a later launch whose decision fails leaves no plan behind (the earlier one would be read as this one's)
    monkeypatch.setattr(packing, "free_memory", lambda kind, index: (_ for _ in ()).throw(RuntimeError("no probe")))
    with pytest.raises(RuntimeError, match="no probe"):
        placement.DevicePlacement().on_multirun_start(cfg)
    assert not (sweep_dir / packing.PLAN).exists()


def test_auto_without_a_plan_and_bad_values_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"sweep.jobs_per_device=auto: no plan at .*jobs_per_device.json"):
        packing.jobs_per_device("auto", tmp_path)
    assert packing.jobs_per_device(4, None) == 4
    for bad in ("many", 0, True):
        with pytest.raises(Exception, match="sweep.jobs_per_device"):
            SweepConfig(jobs_per_device=bad)
    with pytest.raises(ValueError, match="a cpu pool has no accelerator memory"):
        packing.free_memory("cpu", 0)
