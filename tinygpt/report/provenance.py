"""The report's provenance table: the code, libraries and device behind each run, and a warning when they differ.

Each run's ``provenance`` in run.json (tinygpt/train/provenance.py) lists one entry per training session. A table
is read as "the variants differ by their overrides only"; when its runs came from different commits, a dirty tree,
other library versions or other chips, that no longer holds, and the report says so above the table's rows.
Runs written before tinygpt recorded provenance are listed as not recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

from tinygpt.report.jobs import Job
from tinygpt.report.tables import seed_label, variant_labels, variants
from tinygpt.train.provenance import CODE_FIELDS, DEVICE_FIELDS

LIBRARIES = ("torch", "lightning", "hydra-core", "transformers")


def sessions(job: Job) -> list[dict]:
    return list((job.record or {}).get("provenance") or [])


def _code(session: dict) -> str:
    commit = session.get("commit")
    code = f"tinygpt {session.get('tinygpt') or '?'}"
    if commit:
        code += f" @ {commit[:10]}" + (" (dirty)" if session.get("dirty") else "")
    return code


def _libraries(session: dict) -> str:
    return ", ".join(f"{name} {session[name]}" for name in LIBRARIES if session.get(name)) + (
        f", Python {session['python']}" if session.get("python") else ""
    )


def _peak(session: dict) -> str:
    peak = session.get("matmul_peak_flops")
    if peak is None:
        return "—"
    return f"{peak / 1e9:,.1f} GFLOP/s ({session.get('matmul_peak_source') or '?'})"


def differences(jobs: Sequence[Job]) -> list[str]:
    """What differs between the recorded sessions of these runs: code, libraries, device, precision."""
    recorded = [s for job in jobs for s in sessions(job)]
    found = []
    for what, fields in (
        ("code", CODE_FIELDS),
        ("libraries", (*LIBRARIES, "python")),
        ("devices", DEVICE_FIELDS),
        ("precisions", ("precision",)),
    ):
        values = sorted({tuple(str(s.get(f)) for f in fields) for s in recorded})
        if len(values) > 1:
            found.append(f"{what} ({'; '.join(' '.join(v) for v in values)})")
    return found


def provenance_section(jobs: Sequence[Job]) -> list[str]:
    """The report's lines: a warning when the runs differ, then one row per run and session."""
    started = [job for job in jobs if job.record]
    if not started:
        return []
    lines = ["", "## Provenance", ""]
    unrecorded = [job for job in started if not sessions(job)]
    if len(unrecorded) == len(started):
        return lines + [
            "No run records what produced it (run.json's `provenance`: these runs were written before tinygpt "
            "recorded it), so this report cannot tell whether they share code and device.",
            "",
        ]
    found = differences(started)
    if found:
        lines += [
            f"**Warning: the runs of this report differ in {', and in '.join(found)}.** A gap between "
            "variants may come from these, not from their overrides.",
            "",
        ]
    else:
        lines += ["Every recorded run came from the same code, libraries, device and precision.", ""]
    if unrecorded:
        lines += [f"{len(unrecorded)} run(s) have no provenance (written before tinygpt recorded it).", ""]
    lines += [
        "| Variant | Seed | From step | Code | Libraries | Device | Precision | MFU peak |",
        "| --- | ---: | ---: | --- | --- | --- | --- | --- |",
    ]
    groups = variants(started)
    labels = variant_labels(list(groups))
    for key, group in groups.items():
        for job in group:
            for session in sessions(job) or [{}]:
                if not session:
                    lines.append(f"| {labels[key]} | {seed_label(job)} | — | not recorded | | | | |")
                    continue
                lines.append(
                    f"| {labels[key]} | {seed_label(job)} | {session.get('from_step', 0):,} | {_code(session)} | "
                    f"{_libraries(session)} | {session.get('device', '—')} | {session.get('precision', '—')} | "
                    f"{_peak(session)} |"
                )
    return lines + [""]
