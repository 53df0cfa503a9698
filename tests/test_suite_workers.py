"""The suite's own parallelism: ``make test`` runs the test files on pytest-xdist workers, each pinned to cores of its
own (tests/conftest.py's pin_this_worker), so that neither torch nor a sweep's placement counts the other worker's
cores as its own; and the files with slow tests go to them first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import WORKER_CORES, pin_this_worker, pytest_collection_modifyitems


def test_workers_split_the_cores_between_them(monkeypatch):
    pinned = []
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4}, raising=False)
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cores: pinned.append(list(cores)), raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        pin_this_worker()
    assert pinned == [[0, 2, 4], [1, 3]]
    # more workers than cores: the scheduler places them; and outside xdist nothing is pinned
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "6")
    assert pin_this_worker() is None
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert pin_this_worker() is None and len(pinned) == 2


@pytest.mark.skipif(WORKER_CORES is None, reason="not under pytest-xdist (make test runs the suite on its workers)")
def test_this_worker_and_its_subprocesses_run_on_its_cores_with_a_thread_each():
    assert sorted(os.sched_getaffinity(0)) == WORKER_CORES
    assert torch.get_num_threads() == len(WORKER_CORES)
    child = subprocess.run(
        [sys.executable, "-c", "import os, torch; print(sorted(os.sched_getaffinity(0)), torch.get_num_threads())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.split() == [*str(WORKER_CORES).split(), str(len(WORKER_CORES))]


def test_the_files_with_slow_tests_come_first():
    class Item:
        def __init__(self, path, slow=False):
            self.path, self.slow = Path(path), slow

        def get_closest_marker(self, name):
            return name == "slow" and self.slow or None

    items = [Item("a.py"), Item("b.py"), Item("b.py", slow=True), Item("c.py"), Item("d.py", slow=True), Item("a.py")]
    order = [(item.path.name, item.slow) for item in items]
    pytest_collection_modifyitems(None, None, items)
    # b and d hold slow tests: they go first, each file's tests and the others' in their own order
    assert [(item.path.name, item.slow) for item in items] == [order[i] for i in (1, 2, 4, 0, 3, 5)]
