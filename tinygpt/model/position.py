"""Position information, one class per encoding, and POSITIONS: the registry `model.position` names.

Every encoding answers the same three questions, so the GPT asks them without knowing which one it has:
a table to add to the token embeddings (learned, sinusoidal), cos/sin rows to rotate queries and keys with
(RoPE), or a bias to add to the attention scores (ALiBi); each answers None to the others. Adding an encoding
is one class here, registered in POSITIONS, and one file conf/model/position/<name>.yaml: GPTConfig's allowed
names, its error message and the GPT's dispatch all read the registry.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
from torch import nn

from tinygpt.common.errors import ConfigError


class GPTConfig(Protocol):
    """What an encoding reads of the model's config (tinygpt/model/gpt.py's GPTConfig, whose checks call the
    encodings' ``check``: so this file names the fields it reads rather than importing the class that imports it)."""

    context_length: int
    d_model: int
    n_heads: int
    rope_base: float

    @property
    def resolved_head_dim(self) -> int: ...


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

    x: (..., T, head_dim); cos, sin: (T, head_dim/2), the rows for x's positions (or any shapes that broadcast
    so: attention passes x as (B, T, heads, head_dim) and the rows as (T, 1, head_dim/2)). Pairs are adjacent
    dimensions (2i, 2i+1), as in 000, and stay where they are (the HF exporter depends on this convention).

    Each pair is a complex number x_2i + i·x_2i+1 multiplied by cos + i·sin: one elementwise complex product
    on a view of x, where writing the two real halves out and interleaving them again (torch.stack + flatten)
    cost three extra copies of q and k per layer, which made RoPE's forward and backward several times slower
    (docs/benchmarks/train.md). The values are the same up to float rounding (tests/test_speedups.py).
    Computed in fp32 (complex64; there is no bf16 complex), as the real formula with fp32 cos/sin was, and
    returned in x's dtype.
    """
    real = x if x.dtype in (torch.float32, torch.float64) else x.float()
    pairs = real.unflatten(-1, (-1, 2))
    # view_as_complex needs each pair adjacent and aligned: always so for attention's q and k (even head_dim);
    # other callers' odd slices are copied. Not asked under torch.compile, which traces views without offsets.
    if not torch.compiler.is_compiling() and (
        pairs.stride(-1) != 1 or pairs.storage_offset() % 2 or any(s % 2 for s in pairs.stride()[:-1])
    ):
        pairs = pairs.contiguous()
    rotated = torch.view_as_complex(pairs) * torch.complex(cos, sin).to(dtype=torch.complex64)
    return torch.view_as_real(rotated).flatten(-2).type_as(x)


class Positions(nn.Module):
    """No position information at all (003's "no position" ablation): the base every encoding overrides.

    The hooks take `start`, the position of the first new token (0 without a KV cache), and `n`, how many
    new tokens there are; `attention_bias` also takes the number of keys attended over (n without a cache,
    the cache's full, fixed length with one).
    """

    def __init__(self, config: GPTConfig):
        super().__init__()

    @staticmethod
    def check(config: GPTConfig) -> None:
        """Raise ValueError naming the GPTConfig field if `config` cannot use this encoding."""

    def embeddings(self, start: int, n: int, device: torch.device) -> torch.Tensor | None:
        """(n, d_model) added to the token embeddings, or None."""
        return None

    def rotary(self, start: int, n: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """cos and sin rows (n, head_dim/2) that attention rotates queries and keys by, or None."""
        return None

    def attention_bias(self, start: int, n: int, n_keys: int) -> torch.Tensor | None:
        """(n_heads, n, n_keys) added to the attention scores before the causal mask, or None."""
        return None


class RotaryPositions(Positions):
    """RoPE (Su et al., 2021): queries and keys rotated by their position inside attention; no parameters."""

    def __init__(self, config: GPTConfig):
        super().__init__(config)
        cos, sin = rope_angles(config.resolved_head_dim, config.context_length, config.rope_base)
        # Buffers move with .to(device) but are not trained; persistent=False keeps them out of
        # checkpoints, since they can always be recomputed (000).
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    @staticmethod
    def check(config: GPTConfig) -> None:
        if config.resolved_head_dim % 2:
            raise ConfigError(
                f"GPTConfig.head_dim={config.resolved_head_dim!r} is not allowed: must be an even "
                "number with position=rope (RoPE rotates pairs of dimensions)"
            )

    def rotary(self, start: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.cos[start : start + n], self.sin[start : start + n]


class LearnedPositions(Positions):
    """GPT-2's table: one trained vector per position, added to the token embeddings."""

    def __init__(self, config: GPTConfig):
        super().__init__(config)
        self.table = nn.Embedding(config.context_length, config.d_model)

    def embeddings(self, start: int, n: int, device: torch.device) -> torch.Tensor:
        return self.table(torch.arange(start, start + n, device=device))


class SinusoidalPositions(Positions):
    """The 2017 Transformer's fixed sines and cosines, added to the embeddings; no parameters."""

    def __init__(self, config: GPTConfig):
        super().__init__(config)
        context_length, d_model = config.context_length, config.d_model
        position = torch.arange(context_length, dtype=torch.float32)[:, None]
        freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
        table = torch.zeros(context_length, d_model)
        table[:, 0::2] = torch.sin(position * freq)
        table[:, 1::2] = torch.cos(position * freq)
        # A buffer, not a parameter: it moves with .to(device) but is never trained, and can be recomputed.
        self.register_buffer("table", table, persistent=False)

    @staticmethod
    def check(config: GPTConfig) -> None:
        if config.d_model % 2:
            raise ConfigError(
                f"GPTConfig.d_model={config.d_model!r} is not allowed: must be an even number with "
                "position=sinusoidal (sine and cosine pairs)"
            )

    def embeddings(self, start: int, n: int, device: torch.device) -> torch.Tensor:
        return self.table[start : start + n]


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's per-head slopes (Press et al., 2021), shape (n_heads,).

    For n a power of two, head i (1-based) gets 2^(-8i/n): a geometric sequence from 2^(-8/n) down to 2^-8.
    Otherwise, as in the paper's reference code, the slopes of the next lower power of two m, followed by
    every other slope of 2m (the odd-numbered ones), up to n in all.
    """

    def powers_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * i / n) for i in range(1, n + 1)]

    m = 2 ** math.floor(math.log2(n_heads))
    slopes = powers_of_two(m) + powers_of_two(2 * m)[0::2][: n_heads - m]
    return torch.tensor(slopes, dtype=torch.float32)


class ALiBiPositions(Positions):
    """ALiBi (Press et al., 2021): no embeddings; each head adds -slope · distance to its attention scores.

    Query at position i, key at j <= i: bias -m_h · (i - j), so each head prefers nearby tokens at its own
    rate. No parameters; the slopes are a non-persistent buffer (recomputable, out of the checkpoints). Works
    with GQA (the bias is per query head) and the KV cache (positions are absolute, keys from 0).
    """

    def __init__(self, config: GPTConfig):
        super().__init__(config)
        self.register_buffer("slopes", alibi_slopes(config.n_heads), persistent=False)

    def attention_bias(self, start: int, n: int, n_keys: int) -> torch.Tensor:
        device = self.slopes.device
        queries = torch.arange(start, start + n, device=device, dtype=torch.float32)
        keys = torch.arange(n_keys, device=device, dtype=torch.float32)
        distance = keys[None, :] - queries[:, None]  # (n, n_keys): <= 0 for every key a query may see
        return self.slopes[:, None, None] * distance


# model.position's names and their classes: GPTConfig checks against the keys, the GPT builds from the values.
POSITIONS: dict[str, type[Positions]] = {
    "rope": RotaryPositions,
    "learned": LearnedPositions,
    "none": Positions,
    "sinusoidal": SinusoidalPositions,
    "alibi": ALiBiPositions,
}
