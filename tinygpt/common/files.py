"""Atomic file writes: a reader (or a process started after a crash) sees the old file or the new one, never
half of one.

The content goes to a hidden temporary file in the same folder (``.<name>.tmp``: the same file system, so the
rename cannot turn into a copy), is flushed and fsync'ed, and ``os.replace`` puts it in place in one step. If
writing fails, the temporary file is removed and the old file is left as it was. Run records, placement
records, checkpoints and the resumed CSV log are all written this way; their writers are single per file (the
run folder's lock, rank zero only), so one fixed temporary name suffices.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from tinygpt.common.errors import ConfigError


@contextmanager
def atomic_write(path: str | Path, mode: str = "w", *, newline: str | None = None) -> Iterator[IO[Any]]:
    """``with atomic_write(path) as file: file.write(...)``; mode "w" (text) or "wb" (bytes). The parent folder
    is created if missing; ``path`` changes only when the block completes without an exception."""
    if mode not in ("w", "wb"):
        raise ConfigError(f"mode={mode!r}: atomic_write writes whole files, mode 'w' or 'wb'")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, mode, newline=newline) as file:
            yield file
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json_atomic(path: str | Path, payload: Any) -> None:
    """``payload`` as indented JSON (numpy and torch scalars written as floats), atomically."""
    with atomic_write(path) as file:
        file.write(json.dumps(payload, indent=2, default=float))
