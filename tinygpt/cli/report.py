"""Turn a sweep into the spec's table and figure:  python scripts/report.py outputs/sweeps/<name>

Writes into the sweep's folder (or --out): report.md (the table, in 000's shape with --style seeds: best
validation loss per seed, mean and spread; in 003's with --style steps: dev bits per byte at each scoring step,
one row per run; then each variant against the reference, paired by seed, with a 95% interval and a verdict;
the runs' provenance), curves.png (one colour per variant: the seeds' mean and min-max band), runs.csv (every
validation point of every run, with its best and final metrics) and comparison.csv. --baselines adds the
compressors, Kneser-Ney and the unigram model on the same text. Runs are grouped by their overrides minus seed;
unfinished, failed and missing runs are marked. Only run records are read, never a held-out score
(the report says how many held-out scorings run.json lists), unless --held-out asks for every held-out scoring
that scripts/evaluate.py split=test logged. Runs with collapse diagnostics get their table. A search's folder
(-m hparams_search=...) also gets its study: trials, best trial, parameter importances, history and slice plots.
Works while a sweep runs.
"""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from tinygpt.baselines.run import cached_baselines
from tinygpt.cli.config import compose_run_config
from tinygpt.cli.entry import entry, fail
from tinygpt.common.run_folder import config_record
from tinygpt.launch.search_config import study_path
from tinygpt.report.beside_baselines import sweep_data
from tinygpt.report.jobs import load_sweep
from tinygpt.report.report import DEFAULT_METRIC, STYLES, write_report
from tinygpt.report.scaling import write_scaling
from tinygpt.report.tables import METRICS
from tinygpt.report.transfer import write_transfer


def experiment_defaults(overrides: Sequence[str]) -> dict:
    """conf/train.yaml composed with ``overrides`` (the ones every run of the sweep shares), resolved: what the
    experiment gives without the variants' own overrides, which the report's default reference matches."""
    return config_record(compose_run_config(overrides))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("sweep_dir", type=Path, help="the sweep's folder, e.g. outputs/sweeps/since_gpt2")
    parser.add_argument(
        "--style",
        choices=(*STYLES, "mutransfer", "scaling"),
        default="auto",
        help="seeds: 000's table; steps: 003's; auto: steps when every run was scored at the "
        "same few (<= 6) steps, else seeds; mutransfer: steps' table, and a sweep over model.d_model x lr x "
        "model.parametrization read as μTransfer (transfer.md, .json, .png: the best learning rate per width); "
        "scaling: seeds' table, and an isoFLOP sweep (budget.flops x size) fitted (scaling.md, .json, .png: "
        "docs/scaling.md)",
    )
    parser.add_argument(
        "--metric",
        choices=sorted(METRICS),
        default=None,
        help=f"default: {DEFAULT_METRIC['seeds']} for seeds, {DEFAULT_METRIC['steps']} for steps",
    )
    parser.add_argument("--out", type=Path, default=None, help="where to write (default: the sweep's folder)")
    parser.add_argument(
        "--held-out",
        action="store_true",
        help="also tabulate the held-out scores logged by tinygpt-evaluate split=test "
        "(evaluations.jsonl) and plot them (heldout.png); off by default",
    )
    parser.add_argument("--ymax", type=float, default=None, help="cut the curves' axis at this value (000: 7.7)")
    parser.add_argument(
        "--figure-only",
        nargs="+",
        default=(),
        metavar="OVERRIDE",
        help="draw only runs with one of these overrides, e.g. ablation=gpt2 ablation=rope "
        "ablation=modern (000's figure); the table keeps every run",
    )
    parser.add_argument(
        "--title",
        default=None,
        help="the report's and figure's name (default: the experiment every run shares, else the folder's name)",
    )
    parser.add_argument(
        "--reference",
        nargs="+",
        default=(),
        metavar="OVERRIDE",
        help="the variant every other is compared with, by its overrides (e.g. ablation=gpt2); default: the "
        "variant that sets the experiment's defaults",
    )
    parser.add_argument(
        "--baselines",
        action="store_true",
        help="add the compressors, Kneser-Ney and the unigram model on the runs' own dev text (and, with --held-out, "
        "their held-out text), computed once into <sweep>/baselines/",
    )
    return parser


@entry()
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    baselines = None
    if args.baselines:
        try:
            data = sweep_data(load_sweep(args.sweep_dir))
            out = args.sweep_dir / "baselines"
            splits = (["dev"] if data.get("dev") != "none" else []) + (["test"] if args.held_out else [])
            baselines = {split: cached_baselines(data, split, out) for split in splits}
        except ValueError as refused:  # DataError included: e.g. a sweep split at token positions
            raise fail(str(refused), "refused") from None
    report = write_report(
        args.sweep_dir,
        style={"mutransfer": "steps", "scaling": "seeds"}.get(args.style, args.style),
        metric=args.metric,
        out_dir=args.out,
        held_out=args.held_out,
        ymax=args.ymax,
        figure_only=args.figure_only,
        title=args.title,
        reference=args.reference,
        defaults=experiment_defaults,
        baselines=baselines,
    )
    written = [report.markdown, report.figure, report.table, report.comparison]
    if args.style == "mutransfer":
        written += write_transfer(report.table, report.table.parent)
        print(report.table.with_name("transfer.md").read_text())
    if args.style == "scaling":
        written += write_scaling([job.record for job in report.jobs if job.record], report.table.parent)
        print(report.table.with_name("scaling.md").read_text())
    if study_path(args.sweep_dir).exists():  # a search's folder: its study first, under the report's title
        from tinygpt.report.study import write_study_section  # Optuna, for a search's folder alone

        section = write_study_section(args.sweep_dir, args.out)
        title, _, rest = report.markdown.read_text().partition("\n\n")
        report.markdown.write_text(f"{title}\n\n{section.markdown}\n{rest}")
        written += section.files
    print(report.markdown.read_text())
    print("wrote " + ", ".join(str(path) for path in written if path is not None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
