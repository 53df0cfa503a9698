"""Copied and repeated masks on hand-made strings and against 003's own quadratic definitions; the repeats table
per character and per token (a BPE model's costs, its window in tokens); longest match."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tinygpt.analysis.memorization import longest_match
from tinygpt.analysis.repeats import copied_mask, repeated_mask, repeats_table, window_starts


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
    assert row["mixed"]["chars"] == 0  # one token per character: nothing straddles an edge
    # 5..8 are in both masks: the classes sum to 13 of the 9 scored characters, and "both" says by how much
    assert row["both"]["chars"] == 4 and row["both"]["mean_bits"] == pytest.approx(6.5)
    assert sum(row[k]["chars"] for k in ("copied", "repeated", "rest", "mixed")) - row["both"]["chars"] == 9
    assert repeats_table(text, train, bits, T=2, spans=(4,), token_chars=np.ones(10, dtype=int)) == [row]


def test_repeats_table_per_token_classes_whole_tokens_and_counts_the_window_in_tokens():
    text, train = "abcdQabcdZ", "xxabcdxx"  # copied (4+): characters 0..3 and 5..8
    token_chars = np.array([3, 2, 4, 1])  # "abc" "dQ" "abcd" "Z"
    bits = np.array([9.0, 1.0, 2.0, 3.0])  # the first token unscored
    (row,) = repeats_table(text, train, bits, T=1, spans=(4,), token_chars=token_chars)
    # "dQ" is half copied: mixed; "abcd" copied and, its first occurrence before the token 1 back, repeated
    assert {k: row[k]["chars"] for k in ("copied", "repeated", "rest", "mixed")} == {
        "copied": 4,
        "repeated": 4,
        "rest": 1,
        "mixed": 2,
    }
    assert row["copied"]["mean_bits"] == 0.5 and row["rest"]["mean_bits"] == 3.0 and row["mixed"]["mean_bits"] == 0.5
    assert row["copied"]["fraction"] == pytest.approx(4 / 7)
    # two tokens back the window reaches character 0, so the model sees the first "abcd" (per character it would
    # not: 0 < 5 - 2)
    (row,) = repeats_table(text, train, bits, T=2, spans=(4,), token_chars=token_chars)
    assert row["repeated"]["chars"] == 0 and row["repeated"]["mean_bits"] is None
    assert repeated_mask(text, 4, T=2)[5:9].all()


def test_a_token_that_continues_a_character_goes_with_it():
    # "aéb" in a byte-level BPE: "a", the first byte of "é", its second byte (no character of its own), "b"
    token_chars = np.array([1, 1, 0, 1])
    assert window_starts(3, 1, token_chars).tolist() == [-1, 0, 2]
    (row,) = repeats_table("aéb", "", np.array([7.0, 1.0, 2.0, 4.0]), T=0, spans=(1,), token_chars=token_chars)
    assert row["rest"]["chars"] == 2 and row["rest"]["mean_bits"] == 3.5  # (1 + 2 + 4) bits over "é" and "b"
    with pytest.raises(ValueError, match="sums to 2 characters, the text has 3"):
        repeats_table("aéb", "", np.zeros(2), T=0, spans=(1,), token_chars=np.array([1, 1]))


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
