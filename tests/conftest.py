"""Shared fixtures: composing tinygpt's Hydra config in-process, a small corpus that needs no data root."""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
from pathlib import Path


def pin_this_worker() -> list[int] | None:
    """Under pytest-xdist (``make test`` runs one worker per core), this worker's share of the cores: worker i of n
    takes every n-th core from the i-th, and its subprocesses inherit the mask. Without it each worker's torch, and
    each sweep's threads-per-job (tinygpt/launch/placement.py), would count every core of the machine, and two
    workers' thread pools would spin against each other on cores they both believe they own (tiny ops ran ~70x
    slower that way on a 2-core machine). It runs before torch is imported, since torch counts its threads then.
    None when not under xdist, or with more workers than cores (left to the scheduler)."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker or not count or not hasattr(os, "sched_setaffinity"):
        return None
    index, workers = int(worker.removeprefix("gw")), int(count)
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < workers:
        return None
    mine = cores[index::workers]
    os.sched_setaffinity(0, mine)
    return mine


WORKER_CORES = pin_this_worker()

import pytest  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

from tinygpt.cli.config import register_configs  # noqa: E402

register_configs()  # the typed schemas, as every entry point does (tinygpt/cli/config.py)

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"

# Sweeps launched by the tests lease devices in a folder of their own (sweep.lease_dir follows this variable, and
# subprocesses inherit it), so they never wait on, or block, a real sweep running on the same machine. It goes at the
# end of the session (pytest_sessionfinish), so runs of the suite leave nothing in the temp folder.
LEASE_DIR = tempfile.mkdtemp(prefix="tinygpt-test-leases-")
os.environ["TINYGPT_LEASE_DIR"] = LEASE_DIR
# Prepared corpora (tinygpt/data/prepared.py) likewise: the tests' own, shared by the tests of one worker, removed at
# the end; never the user's ~/.cache/tinygpt/prepared.
PREPARED_DIR = tempfile.mkdtemp(prefix="tinygpt-test-prepared-")
os.environ["TINYGPT_PREPARED"] = PREPARED_DIR

# a tiny model and a short run: what the training tests have in common
TINY_RUN = ["experiment=smoke"]


def compose_train(overrides: list[str]):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("train", overrides=overrides)


def word_salad() -> str:
    """About 30 KB of word salad from a fixed vocabulary: enough for windows of 32, no data root needed."""
    rng = random.Random(0)
    words = (
        "time machine traveller the of and a to in was it that he I his had with at for as "
        "future morlocks eloi sphinx night light green white world strange"
    ).split()
    lines = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(500)]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "salad.txt"
    path.write_text(word_salad())
    return path


@pytest.fixture
def tiny_cfg(small_corpus):
    def make(*extra: str):
        return compose_train(TINY_RUN + ["data=textfile", f"data.path={small_corpus}", *extra])

    return make


def real_data_root() -> Path | None:
    root = os.environ.get("TINYGPT_DATA")
    return Path(root) if root and Path(root).is_dir() else None


requires_data = pytest.mark.skipif(real_data_root() is None, reason="TINYGPT_DATA is not set (CI sets it)")


def pytest_sessionstart(session):
    """The suite needs the named corpora and GPT-2's tokenizer files (from $TINYGPT_DATA, or fetched into the
    download cache); without them it stops here, in one line that says which file, where it was looked for and
    how to point at a copy, instead of failing test after test."""
    from tinygpt.data.download import ensure_files
    from tinygpt.data.errors import DataError
    from tinygpt.data.root import resolve_data_root
    from tinygpt.data.sources import GPT2_FILES, NAMED_CORPORA

    try:
        root = resolve_data_root(None)
        for name, corpus in NAMED_CORPORA.items():
            ensure_files(root, corpus.files, f"the tests' data={name}")
        ensure_files(root, GPT2_FILES, "the tests' GPT-2 tokenizer files")
    except DataError as missing:
        pytest.exit(f"tinygpt's tests cannot start: {missing}", returncode=4)


def pytest_collection_modifyitems(session, config, items):
    """The files that hold a ``slow`` test run first, in collection order otherwise: ``make test`` hands whole files
    to its xdist workers in this order (``--no-loadscope-reorder``), so a minute-long test starts while the other
    worker has short files left, instead of last, alone."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: each file keeps its own order


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(LEASE_DIR, ignore_errors=True)
    shutil.rmtree(PREPARED_DIR, ignore_errors=True)


PYTHON = sys.executable


@pytest.fixture
def restore_threads():
    """torch's thread count (which device placement sets) and this process's lease, put back after the test."""
    import torch

    from tinygpt.launch import placement

    before = torch.get_num_threads()
    yield before
    placement.release()
    torch.set_num_threads(before)


@pytest.fixture
def crash_at_step_6(monkeypatch):
    """Makes training raise "simulated crash" in step 6 (after last.ckpt at step 4); call the returned function to
    train normally again."""
    from tinygpt.train.module import GPTModule

    original = GPTModule.training_step

    def crashing(self, batch, batch_idx):
        if self.global_step == 5:
            raise RuntimeError("simulated crash")
        return original(self, batch, batch_idx)

    monkeypatch.setattr(GPTModule, "training_step", crashing)
    return lambda: monkeypatch.setattr(GPTModule, "training_step", original)
