"""Sliding windows for scoring a token sequence, every target exactly once.

A window is T input tokens predicting the next T. Windows start every T/2 tokens; the first window scores all
of its targets (every token after the first), each later window only its second half, so every scored token
after the first T has at least T/2 tokens of context (003: "slides a window of 256 by 128 and scores the
second half of each window"). When the sequence does not end on a window boundary, a final window is shifted
left to end at the last token, keeping its full T of context, and scores only the targets not scored yet.
"""

from __future__ import annotations

import torch
from torch.utils.data import Dataset

from tinygpt.common.errors import ConfigError


def sliding_windows(n_tokens: int, context_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(starts, score_from), Long[W] each: window w reads tokens[starts[w] : starts[w] + T + 1] and scores its
    targets at local positions >= score_from[w] (target j is token starts[w] + 1 + j)."""
    T = context_length
    if T < 2:
        raise ConfigError(f"context_length must be at least 2 to slide by T/2, got {T}")
    if n_tokens < T + 1:
        raise ConfigError(f"{n_tokens} tokens are fewer than one window of context_length + 1 = {T + 1}")
    stride = T // 2
    last_start = n_tokens - 1 - T  # the last start whose window still fits
    starts = list(range(0, last_start + 1, stride))
    score_from = [0] + [T - stride] * (len(starts) - 1)
    last_scored = starts[-1] + T  # index of the last token scored so far
    if last_scored < n_tokens - 1:
        starts.append(last_start)
        score_from.append(last_scored - last_start)
    return torch.tensor(starts, dtype=torch.long), torch.tensor(score_from, dtype=torch.long)


class SlidingWindowDataset(Dataset):
    """The scoring windows of one encoded split, as dict items that collate into the metric's batch:
    input, target, scored (Bool), target_bytes, target_chars, target_doc, each [T] (and [B, T] batched)."""

    def __init__(
        self,
        ids: torch.Tensor,
        token_bytes: torch.Tensor,
        token_chars: torch.Tensor,
        context_length: int,
        token_doc: torch.Tensor | None = None,
    ):
        # kept as given (a prepared dev split's are int32 tensors over mapped files): a window is made int64 as it is
        # read, so a dataset over a large split copies nothing
        self.ids = ids
        self.token_bytes = token_bytes
        self.token_chars = token_chars
        self.token_doc = token_doc
        self.context_length = context_length
        self.starts, self.score_from = sliding_windows(len(self.ids), context_length)
        self._positions = torch.arange(context_length)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        start, T = int(self.starts[index]), self.context_length
        targets = slice(start + 1, start + T + 1)
        doc = torch.zeros(T, dtype=torch.long) if self.token_doc is None else self.token_doc[targets].long()
        return {
            "input": self.ids[start : start + T].long(),
            "target": self.ids[targets].long(),
            "scored": self._positions >= self.score_from[index],
            "target_bytes": self.token_bytes[targets].long(),
            "target_chars": self.token_chars[targets].long(),
            "target_doc": doc,
        }
