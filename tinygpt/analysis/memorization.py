"""Memorization (003): the longest stretch of a text found verbatim in the training text, and where.

Applied to samples of a checkpoint (seeded), to greedy decoding from a prompt, and, for comparison, to pieces of
held-out text a person wrote: a model that copies its training text shows stretches far longer than people's
own reuse of headings, formulas and boilerplate.

The search is 003's longest_copied: for each start it only tries stretches longer than the best so far, so a
query of q characters costs q + (best length) substring searches, each in C over the training text. Queries
are samples and short pieces (hundreds of characters), for which that is fast; the masks over whole splits
(repeats.py) use hashing instead.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Match:
    length: int
    text: str  # the stretch
    query_start: int  # where it starts in the query
    train_offset: int  # where it first occurs in the training text (-1 when length is 0)


def longest_match(query: str, train: str) -> Match:
    best, where = 0, 0
    for i in range(len(query)):
        j = i + best + 1
        while j <= len(query) and query[i:j] in train:
            best, where = j - i, i
            j += 1
    stretch = query[where : where + best]
    return Match(best, stretch, where if best else -1, train.find(stretch) if best else -1)
