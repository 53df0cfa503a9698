"""Where corpora live: the data root.

Order: `data.root` if set, else the environment variable TINYGPT_DATA, else a per-user cache directory
(~/.cache/tinygpt, or $XDG_CACHE_HOME/tinygpt). A root the user named explicitly must exist, since a typo
there would otherwise turn into a silent download somewhere unexpected; the cache directory is created
only when a named corpus is downloaded into it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tinygpt.data.errors import DataError

ENV_VAR = "TINYGPT_DATA"


@dataclass(frozen=True)
class DataRoot:
    path: Path
    origin: str  # "data.root", "$TINYGPT_DATA" or "cache": says where the path came from, for messages

    def resolve(self, relative_or_absolute: str | os.PathLike) -> Path:
        candidate = Path(relative_or_absolute).expanduser()
        return candidate if candidate.is_absolute() else self.path / candidate


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tinygpt"


def resolve_data_root(configured: str | os.PathLike | None) -> DataRoot:
    if configured not in (None, ""):
        root = DataRoot(Path(configured).expanduser(), "data.root")
    elif os.environ.get(ENV_VAR):
        root = DataRoot(Path(os.environ[ENV_VAR]).expanduser(), f"${ENV_VAR}")
    else:
        return DataRoot(default_cache_dir(), "cache")
    if not root.path.is_dir():
        raise DataError(
            f"data root {root.path} (from {root.origin}) does not exist or is not a directory; create it, "
            f"fix {root.origin}, or unset it to use the cache directory {default_cache_dir()}"
        )
    return root
