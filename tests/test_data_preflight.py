"""Without the project's data folder and without network, a named corpus fails once, in one line, before a run or
a sweep makes any folder: it names the corpus, the folder looked in, the URL tried and the two ways to point at a
local copy. (The test suite itself stops at its start the same way: tests/conftest.py's pytest_sessionstart.)"""

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import PYTHON, REPO

# no network for the child: every download goes to a closed local port and is refused at once
NO_NETWORK = {name: "http://127.0.0.1:9" for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")}


def offline(tmp_path, *arguments: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TINYGPT_DATA"}
    env |= NO_NETWORK | {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    return subprocess.run(
        [PYTHON, "scripts/train.py", *arguments], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("mode", ["run", "multirun"])
def test_a_missing_corpus_is_one_line_and_leaves_nothing_behind(tmp_path, mode):
    where = tmp_path / "outputs"
    arguments = (
        ["trainer.max_steps=2", f"hydra.run.dir={where}"]
        if mode == "run"
        else ["-m", "trainer.max_steps=2", "seed=0,1", f"hydra.sweep.dir={where}"]
    )
    done = offline(tmp_path, *arguments)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    cache = tmp_path / "cache" / "tinygpt"
    assert line.startswith("[tinygpt] error: the timemachine corpus: 1 file(s) missing in tinygpt's download cache")
    assert f"{cache} (no data.root given, $TINYGPT_DATA not set)" in line
    assert "downloading http://d2l-data.s3-accelerate.amazonaws.com/timemachine.txt failed" in line
    assert f"-> {cache / 'timemachine' / 'timemachine.txt'}" in line
    assert line.endswith("or point $TINYGPT_DATA or data.root=<folder> at a folder that already holds them")
    assert not where.exists()  # no run or sweep folder, no .hydra/, no run.lock, no empty train.log
    assert not list(cache.rglob("*"))  # and no empty folder in the cache either
