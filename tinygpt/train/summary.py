"""What a finished run prints: its dev score, its sample, where its logs and record are, and what to run next."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from tinygpt.common.run_folder import DEV_BITS_PER_BYTE, checkpoints_dir, last_checkpoint, record_path
from tinygpt.common.say import say
from tinygpt.launch.placement import in_multirun
from tinygpt.train.trackers import where


def summarize(result: dict, run_dir: Path, loggers, export_refusal: Callable[[Path], str | None] | None = None) -> None:
    """export_refusal: why the run's last.ckpt would not export (tinygpt/export/export.py's, which the programs
    pass: this layer does not know the export families), or None; without it the export command is printed."""
    final, best = result.get("final"), result.get("best")
    say("", prefix=False)
    say("---- done ----")
    if final:
        say(
            f"dev bits per byte at step {final['step']}: {final[DEV_BITS_PER_BYTE]:.4f} "
            f"(best {best[DEV_BITS_PER_BYTE]:.4f} at step {best['step']})"
        )
    if result.get("pruned"):
        say(f"stopped early by the search's pruner at step {result['pruned']['step']} (run.json: status pruned)")
    say(f"sample:\n{result['sample']}\n")
    for logger in loggers:
        say(f"{type(logger).__name__} logs: {where(logger) or logger.log_dir}")
    say(f"checkpoints: {checkpoints_dir(run_dir)}; run record: {record_path(run_dir)}")
    refused = export_refusal(last_checkpoint(run_dir)) if export_refusal else None
    for line in next_steps(run_dir, refused):
        say(line, prefix=False)


def next_steps(run_dir: Path, export_refused: str | None = None) -> list[str]:
    """Commands for what usually comes next, ready to paste: the run's paths as the shell takes them (a run
    folder's ``=`` and ``,`` need no quotes there, and the programs take a bare path: tinygpt/cli/entry.py). The
    export command only when the run exports (``export_refused`` None); else why it does not."""
    folder = shown_path(run_dir)
    last = shown_path(last_checkpoint(run_dir))
    export = f"  tinygpt-export {last} out={shlex.quote(str(Path('outputs') / 'hf' / Path(run_dir).name))}"
    lines = [
        "next:",
        f"  tinygpt-evaluate {folder}                 # every checkpoint on the dev split",
        f"  tinygpt-generate {last} prompt='...'",
        export if export_refused is None else f"  (no export to transformers: {export_refused})",
        f"  tensorboard --logdir {folder}",
    ]
    if in_multirun():
        lines.insert(1, f"  tinygpt-report {shown_path(Path(run_dir).parent)}   # the sweep's table, once its jobs end")
    return lines


def shown_path(path: Path) -> str:
    """``path`` relative to the current folder when under it, shell-quoted where it must be."""
    path = Path(path).resolve()
    try:
        path = path.relative_to(Path.cwd())
    except ValueError:
        pass
    return shlex.quote(str(path))
