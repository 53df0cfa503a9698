"""Unigram entropy: what a model that knows only token frequencies would score (003's collapse baseline)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tinygpt.common.errors import ConfigError


def unigram_entropy_bits(ids: torch.Tensor | Sequence[int]) -> float:
    """Entropy of the token frequency distribution of ids, in bits per token."""
    ids = torch.as_tensor(ids, dtype=torch.long).reshape(-1)
    if ids.numel() == 0:
        raise ConfigError("unigram_entropy_bits: no tokens")
    counts = torch.bincount(ids).double()
    p = counts[counts > 0] / ids.numel()
    return float(-(p * p.log2()).sum())
