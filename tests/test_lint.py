"""`ruff check` stays clean and the tree stays `ruff format`ted: part of the suite, so CI enforces both."""

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ruff_check_is_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is a dev dependency: pip install -e .[dev]"
    done = subprocess.run([ruff, "check", "."], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_leaves_the_tree_unchanged():
    """One formatting style (ruff format, 120 columns, pyproject.toml): a file it would change fails, named."""
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is a dev dependency: pip install -e .[dev]"
    done = subprocess.run([ruff, "format", "--check", "."], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, "run `ruff format .`:\n" + done.stdout + done.stderr
