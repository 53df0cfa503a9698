"""The baselines beside a sweep's table: each variant's mean bits per byte and each baseline's, on the same text.

003 reads its models against what needs no neural network: compressors given the training text, Kneser–Ney
and the unigram floor. Those are scored by tinygpt/baselines on the split of the runs' own data config (the same
training text, dev or held-out text, scored positions and bytes), computed once per sweep by the caller and
handed in as their record (``baselines_<split>.json``). Every run of the sweep must share that data, or one
baseline row would stand beside runs trained on other text: ``sweep_data`` refuses, naming the setting.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence

from tinygpt.common.errors import ConfigError
from tinygpt.common.typed import typed
from tinygpt.data.config import DataConfig, text_settings
from tinygpt.report.jobs import FINISHED, Job

NAMES = {
    "kneser-ney": "Kneser–Ney, {order} characters of context",
    "unigram": "unigram (add-one)",
    "lstm": "LSTM (a model=lstm run, its state carried through the text)",
}


def sweep_data(jobs: Sequence[Job]) -> dict:
    """The one data config every started run of the sweep was trained with; ValueError naming the first setting
    on which two runs differ."""
    configs = [(job, (job.record.get("config") or {}).get("data")) for job in jobs if job.record]
    configs = [(job, data) for job, data in configs if data]
    if not configs:
        raise ConfigError("--baselines: no run of this sweep has a recorded data config (run.json's config.data)")
    first_job, first = configs[0]
    flat_first = text_settings(typed(DataConfig, first, "data", ValueError))  # what the baselines are given
    for job, data in configs[1:]:
        flat = text_settings(typed(DataConfig, data, "data", ValueError))
        for key in sorted(set(flat) | set(flat_first)):
            if flat.get(key) != flat_first.get(key):
                raise ConfigError(
                    f"--baselines: the runs differ in {key} ({flat_first.get(key)!r} in {first_job.name}, "
                    f"{flat.get(key)!r} in {job.name}); a baseline row stands beside runs on one text: report "
                    "runs that share their data"
                )
    return first


def baseline_label(name: str) -> str:
    if name.startswith("kneser-ney-"):
        return NAMES["kneser-ney"].format(order=name.removeprefix("kneser-ney-"))
    if name in NAMES:
        return NAMES[name]
    return f"{name} (given the training text)"


def baselines_section(
    groups: Mapping[tuple[str, ...], Sequence[Job]],
    labels: Mapping[tuple[str, ...], str],
    record: Mapping,
    value_of: Callable[[Job], float | None],
    what: str,
    heading: str,
    digits: int = 3,
) -> list[str]:
    """One table, lowest first: the variants' mean ``value_of`` over their finished runs and every baseline of
    ``record``. ``what`` names the variants' value (e.g. "best dev bits per byte")."""
    lines = [
        "",
        heading,
        "",
        f"On the same text as the runs: the {record['split']} split of their data "
        f"({record['scored_chars']:,} scored characters, {record['scored_bytes']:,} bytes, "
        f"{record['unseen_chars']:,} never seen in training); the baselines are given or fitted on the runs' "
        f"training text ({record['train_chars']:,} characters). Computed once ({record['time']}) into "
        "baselines/ beside the runs (tinygpt/baselines; docs/baselines.md states each scoring rule).",
        "",
        "| Model | Bits per byte | What |",
        "| --- | ---: | --- |",
    ]
    rows = []
    for key, group in groups.items():
        values = [v for job in group if job.status == FINISHED and (v := value_of(job)) is not None]
        if values:
            rows.append((statistics.fmean(values), labels[key], f"{what}, mean of {len(values)} run(s)"))
    rows += [(r["bits_per_byte"], f"*{baseline_label(name)}*", "baseline") for name, r in record["baselines"].items()]
    lines += [f"| {label} | {value:.{digits}f} | {note} |" for value, label, note in sorted(rows)]
    return lines + [""]
