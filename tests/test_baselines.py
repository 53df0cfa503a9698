"""Baselines: compressor arithmetic (and Python's own bz2/lzma on The Time Machine), Kneser–Ney on a toy corpus
by hand and summing to 1, the unigram's add-one rule, and the one command with its record and held-out log."""

from __future__ import annotations

import bz2
import json
import lzma
import math
import random
import subprocess
import zlib

import pytest
from conftest import CONF, PYTHON, REPO, real_data_root, requires_data
from hydra import compose, initialize_config_dir

from tinygpt.baselines import KneserNey, Unigram, compressed_bits, load_split_text
from tinygpt.baselines.compressors import score_compressor
from tinygpt.baselines.run import run_baselines


def data_cfg(*overrides: str):
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("tools/baselines", overrides=list(overrides)).data


def test_compressor_bits_are_the_growth_of_the_compressed_training_text():
    train, text = b"the time traveller " * 50, b"the time machine"
    assert compressed_bits("zlib", train, text) == 8 * (
        len(zlib.compress(train + text, 9)) - len(zlib.compress(train, 9))
    )
    assert compressed_bits("bz2", train, text, given=b"x") == 8 * (
        len(bz2.compress(train + b"x" + text, 9)) - len(bz2.compress(train + b"x", 9))
    )
    with pytest.raises(ValueError, match="compressor 'gzip'"):
        compressed_bits("gzip", train, text)


@requires_data
def test_compressors_on_the_time_machine_match_pythons_own_to_1e_6():
    text = load_split_text(data_cfg("data=timemachine"), "test")
    raw = (real_data_root() / "timemachine" / "timemachine.txt").read_text("utf-8")
    rest = raw[: int(len(raw) * 0.9)]
    train, held = rest[: int(len(rest) * 0.9)], raw[int(len(raw) * 0.9) :]
    assert (text.train, text.text) == (train, held)  # the same splits as a training run
    t, h = train.encode(), held.encode()
    for name, compress in (("bz2", lambda b: bz2.compress(b, 9)), ("lzma", lambda b: lzma.compress(b, preset=9))):
        got = score_compressor(name, train, held, [held])
        scored = 8 * (len(compress(t + h)) - len(compress(t + h[:1]))) / len(h[1:])  # first character given
        per_document = 8 * (len(compress(t + h)) - len(compress(t))) / len(h)  # 003's formula
        assert abs(got["bits"] / got["bytes"] - scored) < 1e-6
        doc = got["per_document"][0]
        assert abs(doc["bits"] / doc["bytes"] - per_document) < 1e-6


def test_kneser_ney_by_hand_on_a_toy_corpus():
    # "abcab", one character of context: bigrams ab:2 bc:1 ca:1, so D2 = n1/(n1+2 n2) = 2/4 = 0.5; the
    # continuation counts of a, b, c are all 1, so D1 = 1 and the lowest level is uniform over {a, b, c, unseen}
    kn = KneserNey("abcab", order=1)
    assert kn.discount == {2: 0.5, 1: 1.0}
    assert kn.prob("a", "b") == pytest.approx((2 - 0.5 + 0.5 * 1 * 0.25) / 2)  # 0.8125
    assert kn.prob("a", "c") == pytest.approx(0.5 * 0.25 / 2)  # 0.0625
    assert kn.prob("a", "z") == pytest.approx(0.0625)  # an unseen character: the unseen symbol
    assert kn.prob("d", "a") == pytest.approx(0.25)  # a context never seen: the shorter context's estimate
    assert kn.name == "kneser-ney-1"
    bits = kn.bits_each("abz")
    assert bits[0] == 0 and bits[1] == pytest.approx(-math.log2(0.8125))
    assert bits[2] == pytest.approx(3.0)  # P(z | b) = 0.5 · 1 · 0.25 / 1


@pytest.mark.parametrize("order", [0, 1, 2, 4, 6])
def test_kneser_ney_sums_to_one_over_the_vocabulary(order):
    rng = random.Random(order)
    train = "".join(rng.choice("abcde  \n") for _ in range(3000)) + "xyzzy"
    kn = KneserNey(train, order=order)
    for history in ("", "a", "ab ", train[100:110], "qqqq", "xyz", "\n\n"):
        total = sum(kn.distribution(history).values())
        assert total == pytest.approx(1.0, abs=1e-12), history


def test_kneser_ney_rejects_a_bad_order():
    with pytest.raises(ValueError, match="kn_order=-1"):
        KneserNey("abc", order=-1)


def test_unigram_is_add_one_over_the_char_vocabulary():
    u = Unigram("aab")  # vocabulary a, b + unseen: counts 2+1, 1+1, 0+1 over 3 + 3
    assert [u.prob(c) for c in "abz"] == pytest.approx([3 / 6, 2 / 6, 1 / 6])
    assert list(u.bits_each("az")) == pytest.approx([0.0, math.log2(6)])


def test_one_command_prints_every_baseline_and_logs_held_out_scoring_only(small_corpus, tmp_path):
    data = data_cfg("data=textfile", f"data.path={small_corpus}")
    lines: list[str] = []
    record = run_baselines(data, "dev", kn_order=3, out_dir=tmp_path, echo=lines.append)
    names = [line.split(":")[0] for line in lines[:-1]]
    assert names == ["bz2", "lzma", "zlib", "kneser-ney-3", "unigram"]
    assert all(line.endswith(" bits per byte") for line in lines[:-1])
    saved = json.loads((tmp_path / "baselines_dev.json").read_text())
    text = load_split_text(data, "dev")
    kn = saved["baselines"]["kneser-ney-3"]
    assert kn["bytes"] == text.scored_bytes == record["scored_bytes"]
    expected = KneserNey(text.train, 3).bits_each(text.text).sum() / text.scored_bytes
    assert kn["bits_per_byte"] == pytest.approx(expected, rel=1e-12)
    assert not (tmp_path / "evaluations.jsonl").exists()  # dev is not a held-out scoring
    run_baselines(data, "test", kn_order=3, out_dir=tmp_path, echo=lines.append)
    logged = [json.loads(line) for line in (tmp_path / "evaluations.jsonl").read_text().splitlines()]
    assert [row["baseline"] for row in logged] == ["bz2", "lzma", "zlib", "kneser-ney-3", "unigram"]
    assert all(row["split"] == "test" and row["time"] for row in logged)


def test_baselines_script_runs_on_a_users_textfile(small_corpus, tmp_path):
    done = subprocess.run(
        [
            PYTHON,
            "scripts/baselines.py",
            "data=textfile",
            f"data.path={small_corpus}",
            f"out_dir={tmp_path}",
            "kn_order=2",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "kneser-ney-2: " in done.stdout and "unigram: " in done.stdout
    assert (tmp_path / "baselines_dev.json").exists()
    bad = subprocess.run(
        [
            PYTHON,
            "scripts/baselines.py",
            "data=textfile",
            f"data.path={small_corpus}",
            f"out_dir={tmp_path}",
            "split=train",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode != 0 and "split='train' is not allowed" in bad.stderr


def test_summary_skips_the_first_position_and_counts_unseen_costs():
    import numpy as np

    from tinygpt.analysis.run import _unseen_line
    from tinygpt.baselines.run import summarize

    bits, n_bytes = np.array([9.0, 1.0, 2.0, 3.0]), np.array([1, 1, 2, 1])
    doc, unseen = np.array([0, 0, 1, 1]), np.array([False, False, True, False])
    s = summarize(bits, n_bytes, doc, ["a", "b"], unseen, 0.0)
    assert (s["bits"], s["bytes"], s["unseen_bits"]) == (6.0, 4, 2.0)
    assert s["per_document_bpb"] == {"a": 1.0, "b": pytest.approx(5 / 3)}
    assert summarize(bits, n_bytes, doc, ["a", "b"], None, 0.0)["unseen_bits"] is None
    line = _unseen_line({"m": s}, n_unseen=1, scored_bytes=4)
    assert "1 scored characters never occur" in line and "m pays 2.0 bits per unseen character" in line
    assert "0.500 bits per byte" in line and "(33.3% of its cost)" in line
    bpe_only = _unseen_line({"bpe": {**s, "unseen_bits": None}}, n_unseen=1, scored_bytes=4)
    assert bpe_only.endswith("text. No row here scores one character at a time, so their cost is not separated.")


def test_the_whole_split_is_scored_with_its_first_character_given():
    """Pinned on a fixed text whose first character changes every compressor's output size, so scoring the whole
    text (8·(|C(train + text)| − |C(train)|) over all its bytes) cannot pass for the rule: the first character is
    given, as the GPT's first position is, and its bytes are not counted. Per document: 003's formula, whole."""
    train = "the time traveller (for so it will be convenient to speak of him) was expounding a recondite matter. " * 3
    text = "Xthe time machine"
    t, h = train.encode(), text.encode()
    for name, compress in (
        ("bz2", lambda b: bz2.compress(b, 9)),
        ("lzma", lambda b: lzma.compress(b, preset=9)),
        ("zlib", lambda b: zlib.compress(b, 9)),
    ):
        given = 8 * (len(compress(t + h)) - len(compress(t + h[:1])))
        whole = 8 * (len(compress(t + h)) - len(compress(t)))
        assert given != whole  # the text tells the two rules apart
        got = score_compressor(name, train, text, [text])
        assert (got["bits"], got["bytes"]) == (given, len(h) - 1)
        assert got["per_document"] == [{"bits": whole, "bytes": len(h)}]


def test_one_rule_says_which_runs_share_their_baselines_text(tmp_path):
    """The baselines' cache and the report's --baselines ask the same question, by one rule (text_settings): a model
    setting (tokenizer, batch size) or the data root changes no character of a split; the split settings do."""
    from tinygpt.baselines.run import cached_baselines, same_text
    from tinygpt.report.beside_baselines import sweep_data
    from tinygpt.report.jobs import Job

    base = {"name": "peps", "corpus": "dir", "path": "peps", "glob": "pep-*.rst", "dev": "none"}
    alike = base | {"root": "/elsewhere", "batch_size": 8, "tokenizer": {"name": "bpe", "vocab_size": 2048}}
    other = base | {"fraction": 0.5}
    assert same_text(base, alike) and not same_text(base, other)

    def jobs(*datas):
        return [Job((), tmp_path / f"job{i}", {"config": {"data": d}}) for i, d in enumerate(datas)]

    assert sweep_data(jobs(base, alike)) == base
    with pytest.raises(ValueError, match=r"the runs differ in data.fraction \(1.0 in job0, 0.5 in job1\)"):
        sweep_data(jobs(base, other))
    # a cached record of other text is refused, not read back as these runs' baselines
    (tmp_path / "baselines_test.json").write_text(json.dumps({"data": other, "kn_order": 6}))
    with pytest.raises(ValueError, match="holds the baselines of other data"):
        cached_baselines(base, "test", tmp_path)
