"""Paired-seed statistics: the interval against scipy's own tests and by hand, the verdicts, the one-seed case,
the refusal to pair variants whose batches differ (then Welch's interval), and the report's comparison section,
comparison.csv and default reference on a hand-made sweep."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import yaml
from scipy import stats

from tinygpt.report.comparisons import choose_reference
from tinygpt.report.jobs import load_sweep
from tinygpt.report.report import write_report
from tinygpt.report.stats import (
    BETTER,
    NOISE,
    ONE_SEED,
    WORSE,
    Interval,
    batch_difference,
    compare,
    paired_interval,
    verdict,
    welch_interval,
)
from tinygpt.report.tables import variants

VARIANT = [5.967, 5.892, 5.908]  # 000's RoPE row, best validation loss, seeds 1 / 2 / 3 (our runs)
REFERENCE = [6.147, 6.122, 6.061]  # its GPT-2-style row


def test_paired_interval_is_scipys_ttest_rel():
    interval = paired_interval(VARIANT, REFERENCE)
    low, high = stats.ttest_rel(VARIANT, REFERENCE).confidence_interval(0.95)
    assert (interval.low, interval.high) == pytest.approx((low, high), abs=1e-12)
    assert interval.mean == pytest.approx(-0.18766666666666665)


def test_paired_interval_by_hand():
    """mean ± t(0.975, n-1) · sd / sqrt(n) of the differences: -0.18767 ± 4.303 · 0.03924 / sqrt(3)."""
    differences = [v - r for v, r in zip(VARIANT, REFERENCE, strict=True)]
    mean = sum(differences) / 3
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / 2)
    half = 4.302652729911275 * sd / math.sqrt(3)  # t(0.975, 2)
    interval = paired_interval(VARIANT, REFERENCE)
    assert interval.low == pytest.approx(mean - half, abs=1e-9)
    assert interval.high == pytest.approx(mean + half, abs=1e-9)
    assert (round(interval.low, 3), round(interval.high, 3)) == (-0.285, -0.091)


def test_pairing_is_narrower_than_the_unpaired_interval_when_seeds_move_both_sides():
    reference = [5.0, 5.5, 6.0]  # the seed moves both variants by far more than the variant's effect
    variant = [4.9, 5.35, 5.92]
    paired = paired_interval(variant, reference)
    unpaired = welch_interval(variant, reference)
    assert paired.high < 0 < unpaired.high  # better, paired; within noise, unpaired
    assert paired.high - paired.low < unpaired.high - unpaired.low
    assert paired.mean == pytest.approx(unpaired.mean)


def test_welch_interval_is_scipys_ttest_ind_with_unequal_variances():
    a, b = [1.0, 1.2, 1.1, 1.4], [1.5, 1.3, 1.9]
    low, high = stats.ttest_ind(a, b, equal_var=False).confidence_interval(0.95)
    interval = welch_interval(a, b)
    assert (interval.low, interval.high) == pytest.approx((low, high), abs=1e-12)
    assert interval.mean == pytest.approx(sum(a) / 4 - sum(b) / 3)


@pytest.mark.parametrize(
    ("interval", "expected"),
    [
        (Interval(-0.2, -0.3, -0.1), BETTER),
        (Interval(0.2, 0.1, 0.3), WORSE),
        (Interval(0.02, -0.08, 0.12), NOISE),
        (Interval(-0.2, None, None), ONE_SEED),
    ],
)
def test_verdicts(interval, expected):
    assert verdict(interval) == expected


def test_one_seed_has_no_interval():
    comparison = compare("best", {1: 5.9}, {1: 6.1})
    assert comparison.paired and comparison.differences == pytest.approx((-0.2,))
    assert comparison.interval.low is None and comparison.verdict == ONE_SEED


def test_equal_differences_in_every_seed_are_that_difference_exactly():
    interval = paired_interval([1.0, 2.0, 3.0], [1.5, 2.5, 3.5])
    assert (interval.mean, interval.low, interval.high) == (-0.5, -0.5, -0.5)


def test_pairs_only_the_seeds_both_sides_finished():
    comparison = compare("best", {1: 5.0, 2: 5.1, 3: 5.2}, {1: 5.5, 3: 5.4})
    assert comparison.seeds == (1, 3) and comparison.n == 2
    assert comparison.differences == pytest.approx((-0.5, -0.2))
    assert comparison.better_in == 2


def config(fraction=1.0, tokenizer="char", context=256, eval_batch_size=32, root=None, position="rope"):
    return {
        "seed": 0,
        "model": {"context_length": context, "position": position},
        "data": {
            "name": "peps",
            "fraction": fraction,
            "tokenizer": {"name": tokenizer, "vocab_size": None},
            "eval_batch_size": eval_batch_size,
            "root": root,
            "batch_size": 32,
        },
    }


def test_a_model_switch_keeps_the_batches_and_where_or_how_validation_runs_does_not_count():
    assert batch_difference([config(position="learned")], [config()]) is None
    assert batch_difference([config(eval_batch_size=64, root="/data")], [config()]) is None


@pytest.mark.parametrize(
    ("changed", "named"),
    [
        (config(fraction=0.25), "data.fraction: 0.25 against 1.0"),
        (config(tokenizer="bpe"), "data.tokenizer"),
        (config(context=128), "model.context_length: 128 against 256"),
    ],
)
def test_pairing_is_refused_when_the_batches_differ(changed, named):
    assert named in batch_difference([changed], [config()])


def test_unpaired_comparison_uses_welch_and_says_why():
    comparison = compare("best", {0: 1.0, 1: 1.2, 2: 1.1}, {0: 1.5, 1: 1.3}, unpaired_because="data.fraction: x")
    assert not comparison.paired and comparison.differences == ()
    low, high = stats.ttest_ind([1.0, 1.2, 1.1], [1.5, 1.3], equal_var=False).confidence_interval(0.95)
    assert (comparison.interval.low, comparison.interval.high) == pytest.approx((low, high))
    assert comparison.unpaired_because == "data.fraction: x"


# a hand-made sweep: the reference (learned positions) and RoPE with three seeds, and a fraction with two


def add_run(sweep: Path, overrides: list[str], best: float, final: float, cfg: dict) -> None:
    folder = sweep / ",".join(overrides)
    (folder / ".hydra").mkdir(parents=True)
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    points = [{"step": 50, "dev_loss": best + 0.3, "dev_bits_per_byte": best + 0.3}]
    points += [{"step": 100, "dev_loss": best, "dev_bits_per_byte": best}]
    points += [{"step": 150, "dev_loss": final, "dev_bits_per_byte": final}]
    record = {
        "status": "finished",
        "config": cfg,
        "parameters": 1000,
        "curve": points,
        "best": {"step": 100, "dev_loss": best, "dev_bits_per_byte": best},
        "final": points[-1],
    }
    (folder / "run.json").write_text(json.dumps(record))


@pytest.fixture
def sweep(tmp_path) -> Path:
    sweep = tmp_path / "ablation"
    sweep.mkdir()
    for seed, (learned, rope) in enumerate([(2.0, 1.8), (2.1, 1.95), (2.05, 1.85)]):
        add_run(sweep, ["model.position=learned", f"seed={seed}"], learned, learned + 0.1, config(position="learned"))
        add_run(sweep, ["model.position=rope", f"seed={seed}"], rope, rope + 0.5, config())
    for seed, value in enumerate([2.3, 2.5]):
        add_run(sweep, ["data.fraction=0.25", f"seed={seed}"], value, value, config(fraction=0.25, position="learned"))
    return sweep


def learned_defaults(shared):
    return config(position="learned")


def test_the_default_reference_is_the_variant_with_the_experiments_defaults(sweep):
    groups = variants(load_sweep(sweep))
    reference = choose_reference(groups, defaults=lambda: learned_defaults(()))
    assert reference.key == ("model.position=learned",)
    assert "differ, `data.fraction`, `model.position`, are what conf/train.yaml gives" in reference.why
    rope = choose_reference(groups, defaults=lambda: config())  # the defaults are RoPE's: the rope variant
    assert rope.key == ("model.position=rope",)


def test_a_named_reference_and_a_name_that_matches_no_variant(sweep):
    groups = variants(load_sweep(sweep))
    assert choose_reference(groups, ["model.position=rope"]).key == ("model.position=rope",)
    with pytest.raises(ValueError, match="--reference model.position=alibi: no variant of this sweep"):
        choose_reference(groups, ["model.position=alibi"])


def test_without_a_matching_variant_the_first_launched_is_taken_and_said(sweep):
    groups = variants(load_sweep(sweep))
    reference = choose_reference(groups, defaults=lambda: config(position="alibi"))
    assert reference.key == list(groups)[0] and "first finished variant launched" in reference.why


def test_report_has_the_paired_table_and_comparison_csv(sweep):
    report = write_report(sweep, style="seeds", defaults=learned_defaults)
    text = report.markdown.read_text()
    assert "Reference: **model.position=learned**, the variant that sets the experiment's defaults" in text
    assert "Paired by seed" in text and "scipy.stats.ttest_rel" in text
    # rope - learned per seed: -0.2, -0.15, -0.2 (best); mean -0.183, interval from ttest_rel
    low, high = stats.ttest_rel([1.8, 1.95, 1.85], [2.0, 2.1, 2.05]).confidence_interval(0.95)
    row = (
        f"| model.position=rope | best validation loss | -0.200 / -0.150 / -0.200 (0 / 1 / 2) | -0.183 | "
        f"[{low:+.3f}, {high:+.3f}] | 3 of 3 seeds | better |"
    )
    assert row in text
    assert "| model.position=rope | final validation loss | +0.200 / +0.250 / +0.200 (0 / 1 / 2) | +0.217 |" in text
    assert "unpaired (data.fraction: 0.25 against 1.0): 2 against 3 runs" in text and "Welch" in text
    with report.comparison.open() as handle:
        rows = list(csv.DictReader(handle))
    assert sorted((r["variant"], r["measure"], r["paired"], r["verdict"]) for r in rows) == [
        ("data.fraction=0.25", "best validation loss", "False", "within seed noise"),  # Welch: [-0.595, +1.295]
        ("data.fraction=0.25", "final validation loss", "False", "within seed noise"),
        ("model.position=rope", "best validation loss", "True", "better"),
        ("model.position=rope", "final validation loss", "True", "worse"),
    ]
    rows = [r for r in rows if r["variant"] == "model.position=rope"]
    assert float(rows[0]["ci95_low"]) == pytest.approx(low) and float(rows[0]["ci95_high"]) == pytest.approx(high)
    assert rows[0]["differences"].split() == [repr(1.8 - 2.0), repr(1.95 - 2.1), repr(1.85 - 2.05)]


def test_a_sweep_of_one_seed_says_there_is_no_interval(tmp_path):
    sweep = tmp_path / "one"
    sweep.mkdir()
    add_run(sweep, ["model.position=learned", "seed=0"], 2.0, 2.1, config(position="learned"))
    add_run(sweep, ["model.position=rope", "seed=0"], 1.8, 1.9, config())
    text = write_report(sweep, style="seeds", defaults=learned_defaults).markdown.read_text()
    assert (
        "| model.position=rope | best validation loss | -0.200 (0) | -0.200 | — | 1 of 1 seeds | "
        "one seed: no interval |" in text
    )
    assert "With one seed" in text


def session(**changed) -> dict:
    return {
        "from_step": 0,
        "tinygpt": "0.1.0",
        "commit": "a" * 40,
        "dirty": False,
        "torch": "2.13.0+cpu",
        "lightning": "2.6.6",
        "hydra-core": "1.3.8",
        "transformers": "5.0.0",
        "python": "3.11.7",
        "device": "AMD EPYC",
        "precision": "32-true",
        "matmul_peak_flops": 6.8e10,
        "matmul_peak_source": "measured",
    } | changed


def set_provenance(sweep: Path, name: str, sessions: list[dict]) -> None:
    path = sweep / name / "run.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps(record | {"provenance": sessions}))


def test_report_lists_each_runs_provenance_and_warns_when_code_or_device_differ(sweep):
    for folder in sweep.iterdir():
        set_provenance(sweep, folder.name, [session()])
    text = write_report(sweep, style="seeds", defaults=learned_defaults).markdown.read_text()
    assert "Every recorded run came from the same code, libraries, device and precision." in text
    assert "| model.position=rope | 1 | 0 | tinygpt 0.1.0 @ aaaaaaaaaa | torch 2.13.0+cpu, lightning 2.6.6" in text
    assert "| AMD EPYC | 32-true | 68.0 GFLOP/s (measured) |" in text

    set_provenance(sweep, "model.position=rope,seed=1", [session(), session(from_step=4, dirty=True, device="H200")])
    text = write_report(sweep, style="seeds", defaults=learned_defaults).markdown.read_text()
    assert "**Warning: the runs of this report differ in code (" in text
    assert "True" in text.split("**Warning")[1].split("**")[0] and "devices (AMD EPYC; H200)" in text
    assert "| model.position=rope | 1 | 4 | tinygpt 0.1.0 @ aaaaaaaaaa (dirty) |" in text


def test_runs_without_provenance_are_said_to_have_none(sweep):
    text = write_report(sweep, style="seeds", defaults=learned_defaults).markdown.read_text()
    assert "No run records what produced it" in text


def test_curves_draw_each_variants_seed_mean_and_band_with_the_reference_dashed(sweep, monkeypatch):
    """The figure's artists: per variant with several seeds, a band from the lowest to the highest seed and a line
    through the seeds' mean; the reference's line dashed, the others solid; a legend naming each variant."""
    import matplotlib
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    kept = []
    monkeypatch.setattr(plt, "close", lambda figure: kept.append(figure))
    write_report(sweep, style="seeds", defaults=learned_defaults)
    axes = kept[0].axes[0]
    lines = {line.get_label(): line for line in axes.lines}
    assert set(lines) == {"model.position=learned (reference)", "model.position=rope", "data.fraction=0.25"}
    assert lines["model.position=learned (reference)"].get_linestyle() == "--"
    assert lines["model.position=rope"].get_linestyle() == "-"
    # rope's seeds: 2.1/1.8/2.3, 2.25/1.95/2.45, 2.15/1.85/2.35 at steps 50/100/150 -> mean and min-max
    assert list(lines["model.position=rope"].get_ydata()) == pytest.approx([2.1666667, 1.8666667, 2.3666667])
    bands = [c for c in axes.collections if isinstance(c, PolyCollection)]
    assert len(bands) == 3
    [rope_band] = [
        b.get_paths()[0].vertices[:, 1]
        for b in bands
        if tuple(b.get_facecolor()[0][:3]) == matplotlib.colors.to_rgb(lines["model.position=rope"].get_color())
    ]
    assert min(rope_band) == pytest.approx(1.8) and max(rope_band) == pytest.approx(2.45)
    assert "band: min–max" in axes.get_title()
    assert [t.get_text() for t in axes.get_legend().get_texts()] == list(lines)


# Every setting that decides which windows a seed draws, each with another value it can take: written out here, not
# read from BATCH_FIELDS, so a field dropped from that tuple (its change then paired silently) fails its row.
BATCH_CHANGES = [
    ("data.name", "shakespeare"),
    ("data.corpus", "file"),
    ("data.path", "peps_copy"),
    ("data.glob", "pep-0*.rst"),
    ("data.tokenizer.name", "bpe"),
    ("data.tokenizer.vocab_size", 4096),
    ("data.fraction", 0.5),
    ("data.split_unit", "tokens"),
    ("data.split_seed", 1),
    ("data.dev", "documents"),
    ("data.dev_fraction", 0.2),
    ("data.dev_k", 5),
    ("data.test_fraction", 0.2),
    ("data.test_k", 3),
    ("data.test_documents", ["pep-0008.rst"]),
    ("data.batch_size", 16),
    ("model.context_length", 128),
]


def setting(field: str) -> str:
    """The BATCH_FIELDS entry a leaf belongs to: the tokenizer is one setting, compared whole."""
    return "data.tokenizer" if field.startswith("data.tokenizer.") else field


@pytest.mark.parametrize(("field", "value"), BATCH_CHANGES, ids=[field for field, _ in BATCH_CHANGES])
def test_pairing_is_refused_for_every_batch_setting_naming_it(field, value):
    """Each batch setting changed on its own, in a run's real recorded config (experiment=blog's), refuses the
    pairing and names the setting; the same config with a model switch changed still pairs."""
    from conftest import compose_train
    from omegaconf import OmegaConf

    reference = OmegaConf.to_container(compose_train(["experiment=blog"]))
    variant = json.loads(json.dumps(reference))
    *parents, leaf = field.split(".")
    node = variant
    for name in parents:
        node = node[name]
    assert node[leaf] != value, field
    node[leaf] = value
    why = batch_difference([variant], [reference])
    assert why is not None, field
    assert why.startswith(setting(field) + ":"), why
    switched = json.loads(json.dumps(reference))
    switched["model"]["position"] = "learned"
    assert batch_difference([switched], [reference]) is None


def test_the_table_covers_every_batch_field():
    """A field added to BATCH_FIELDS gets its row above."""
    from tinygpt.report.stats import BATCH_FIELDS

    covered = {setting(field) for field, _ in BATCH_CHANGES}
    assert covered == set(BATCH_FIELDS)
