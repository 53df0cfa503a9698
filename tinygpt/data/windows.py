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


class SlidingWindows:
    """Window w's start and the first of its targets it scores, computed from w (a split of 200 M tokens has 13 M
    windows of 32, which as two int64 tensors held 214 MB): window w reads tokens[start(w) : start(w) + T + 1] and
    scores its targets at local positions >= score_from(w) (target j is token start(w) + 1 + j)."""

    def __init__(self, n_tokens: int, context_length: int):
        T = context_length
        if T < 2:
            raise ConfigError(f"context_length must be at least 2 to slide by T/2, got {T}")
        if n_tokens < T + 1:
            raise ConfigError(f"{n_tokens} tokens are fewer than one window of context_length + 1 = {T + 1}")
        self.T, self.stride = T, T // 2
        self.last_start = n_tokens - 1 - T  # the last start whose window still fits
        self.regular = self.last_start // self.stride + 1  # windows at 0, stride, 2 stride, ...
        last_scored = (self.regular - 1) * self.stride + T  # index of the last token they score
        self.shifted = last_scored < n_tokens - 1  # a final window, shifted left to end at the last token
        self.shifted_from = last_scored - self.last_start

    def __len__(self) -> int:
        return self.regular + int(self.shifted)

    def start(self, w: int) -> int:
        return w * self.stride if w < self.regular else self.last_start

    def score_from(self, w: int) -> int:
        if w == 0:
            return 0
        return self.T - self.stride if w < self.regular else self.shifted_from


def sliding_windows(n_tokens: int, context_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(starts, score_from), Long[W] each, of ``SlidingWindows`` written out."""
    windows = SlidingWindows(n_tokens, context_length)
    starts = [windows.start(w) for w in range(len(windows))]
    return torch.tensor(starts, dtype=torch.long), torch.tensor([windows.score_from(w) for w in range(len(windows))])


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
        self.windows = SlidingWindows(len(self.ids), context_length)
        self._positions = torch.arange(context_length)

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        if not 0 <= index < len(self.windows):
            raise IndexError(f"window {index} of {len(self.windows)}")
        start, T = self.windows.start(index), self.context_length
        targets = slice(start + 1, start + T + 1)
        doc = torch.zeros(T, dtype=torch.long) if self.token_doc is None else self.token_doc[targets].long()
        return {
            "input": self.ids[start : start + T].long(),
            "target": self.ids[targets].long(),
            "scored": self._positions >= self.windows.score_from(index),
            "target_bytes": self.token_bytes[targets].long(),
            "target_chars": self.token_chars[targets].long(),
            "target_doc": doc,
        }
