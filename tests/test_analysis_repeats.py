"""Copied and repeated masks on hand-made strings and against 003's own quadratic definitions; longest match."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tinygpt.analysis.memorization import longest_match
from tinygpt.analysis.repeats import copied_mask, repeated_mask, repeats_table


def copied_003(text, train, span):
    covered = np.zeros(len(text), dtype=bool)
    for i in range(len(text) - span + 1):
        if text[i : i + span] in train:
            covered[i : i + span] = True
    return covered


def repeated_003(text, span, T):
    covered, first_seen = np.zeros(len(text), dtype=bool), {}
    for i in range(len(text) - span + 1):
        s = text[i : i + span]
        if s in first_seen and first_seen[s] < i - T:
            covered[i : i + span] = True
        first_seen.setdefault(s, i)
    return covered


def test_masks_on_a_hand_made_string():
    assert copied_mask("xxabcdyy", "..abcd..", 4).tolist() == [0, 0, 1, 1, 1, 1, 0, 0]
    # "abcd" first at 0, again at 5: repeated when 0 < 5 - T
    assert repeated_mask("abcdQabcd", 4, T=2).tolist() == [0] * 5 + [1] * 4
    assert not repeated_mask("abcdQabcd", 4, T=5).any()  # within the window: the model can see it


def test_masks_equal_003s_definitions_on_random_text():
    rng = random.Random(0)
    train = "".join(rng.choice("ab") for _ in range(400))
    text = "".join(rng.choice("ab") for _ in range(300))
    for span in (3, 6, 9):
        assert (copied_mask(text, train, span) == copied_003(text, train, span)).all()
        for T in (0, 5, 50):
            assert (repeated_mask(text, span, T) == repeated_003(text, span, T)).all()


def test_repeats_table_fractions_and_costs():
    text, train = "abcdQabcdZ", "xxabcdxx"
    bits = np.arange(10, dtype=float)  # position 0 unscored
    (row,) = repeats_table(text, train, bits, T=2, spans=(4,))
    # copied: characters 1..3 and 5..8 (scored ones); repeated: 5..8; rest: 4 and 9
    assert row["copied"]["chars"] == 7 and row["copied"]["mean_bits"] == pytest.approx(np.mean([1, 2, 3, 5, 6, 7, 8]))
    assert row["repeated"]["chars"] == 4 and row["repeated"]["fraction"] == pytest.approx(4 / 9)
    assert row["rest"]["chars"] == 2 and row["rest"]["mean_bits"] == pytest.approx(6.5)


def test_longest_match_and_where():
    m = longest_match("zzhello worldzz", "say hello world!")
    assert (m.length, m.text, m.query_start, m.train_offset) == (11, "hello world", 2, 4)
    assert longest_match("qqq", "abc").length == 0
    rng = random.Random(1)
    train = "".join(rng.choice("abc") for _ in range(200))
    for _ in range(20):
        q = "".join(rng.choice("abc") for _ in range(30))
        brute = max(j - i for i in range(len(q)) for j in range(i, len(q) + 1) if q[i:j] in train)
        assert longest_match(q, train).length == brute
