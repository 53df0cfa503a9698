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

    x: (..., T, head_dim); cos, sin: (T, head_dim/2), the rows for x's positions. Pairs are adjacent
    dimensions (2i, 2i+1), as in 000, and stay where they are (the HF exporter depends on this convention).

    Each pair is a complex number x_2i + i·x_2i+1 multiplied by cos + i·sin: one elementwise complex product
    on a view of x, where writing the two real halves out and interleaving them again (torch.stack + flatten)
    cost three extra copies of q and k per layer; forward and backward of RoPE ran about 5x faster
    (docs/benchmarks/train.md). The values are the same up to float rounding (tests/test_speedups.py).
    Computed in fp32 (complex64; there is no bf16 complex), as the real formula with fp32 cos/sin was, and
    returned in x's dtype.
    """
    real = x if x.dtype in (torch.float32, torch.float64) else x.float()
    pairs = real.unflatten(-1, (-1, 2))
    # view_as_complex needs each pair adjacent and aligned: always so for attention's q and k (even head_dim);
    # other callers' odd slices are copied. Not asked under torch.compile, which traces views without offsets.
    if not torch.compiler.is_compiling() and (
            pairs.stride(-1) != 1 or pairs.storage_offset() % 2 or any(s % 2 for s in pairs.stride()[:-1])):
        pairs = pairs.contiguous()
    rotated = torch.view_as_complex(pairs) * torch.complex(cos, sin).to(dtype=torch.complex64)
    return torch.view_as_real(rotated).flatten(-2).type_as(x)


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
