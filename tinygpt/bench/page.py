"""What the bench programs share: the machine's name for their page, and the page printed and written."""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def publish(doc: str, checks: list[str], out: Path | None) -> None:
    """Print the checks (each a figure against its goal), and write the whole page to ``out`` when given."""
    print("\n" + "\n".join(checks))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(doc)
        print(f"wrote {out}")
