"""Position information: RoPE (rotations inside attention) and tables added to the token embeddings."""

from __future__ import annotations

import math

import torch
from torch import nn


def rope_angles(head_dim: int, n_pos: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotation angle of every (position, pair of dimensions): each (n_pos, head_dim/2).

    Pair i turns by theta_i = base^(-2i/head_dim) radians per position (Su et al., 2021; 000).
    """
    i = torch.arange(head_dim // 2, dtype=torch.float32)
    theta = base ** (-2 * i / head_dim)  # one frequency per pair of dimensions
    ang = torch.arange(n_pos, dtype=torch.float32)[:, None] * theta[None, :]  # (positions, head_dim/2)
    return ang.cos(), ang.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each (even, odd) pair of x's last dimension by its position's angle.

    x: (..., T, head_dim); cos, sin: (T, head_dim/2), the rows for x's positions. The results are
    interleaved back into the original order, as in 000.
    """
    x1, x2 = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)
    return rotated.type_as(x)


class LearnedPositions(nn.Module):
    """GPT-2's table: one trained vector per position, added to the token embeddings."""

    def __init__(self, context_length: int, d_model: int):
        super().__init__()
        self.table = nn.Embedding(context_length, d_model)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.table(positions)


class SinusoidalPositions(nn.Module):
    """The 2017 Transformer's fixed sines and cosines, added to the embeddings; no parameters."""

    def __init__(self, context_length: int, d_model: int):
        super().__init__()
        position = torch.arange(context_length, dtype=torch.float32)[:, None]
        freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
        table = torch.zeros(context_length, d_model)
        table[:, 0::2] = torch.sin(position * freq)
        table[:, 1::2] = torch.cos(position * freq)
        # A buffer, not a parameter: it moves with .to(device) but is never trained, and can be recomputed.
        self.register_buffer("table", table, persistent=False)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        return self.table[positions]
