"""The KV cache (000, "Not recomputing the past"): each layer's keys and values, kept between steps.

The buffers are allocated once at the full context length, so every step hands attention tensors of the same
shape (the spec's GPU run slowed down as the cache grew by one position per step). Keys and values are stored
before the grouped-query repeat, which is where GQA's memory saving comes from.
"""

from __future__ import annotations

import torch

from tinygpt.common.errors import ConfigError
from tinygpt.model.config import GPTConfig


class KVCache:
    """Preallocated keys and values for every layer, each (batch, n_kv_heads, context_length, head_dim).

    `position` is how many positions are already stored. A forward pass with a cache calls `begin(n)`,
    each layer calls `store(layer, k, v)`, and the model calls `advance(n)` once all layers are done.
    """

    def __init__(
        self,
        config: GPTConfig,
        batch_size: int,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ):
        shape = (batch_size, config.resolved_kv_heads, config.context_length, config.resolved_head_dim)
        self.batch_size = batch_size
        self.context_length = config.context_length
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layers)]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layers)]
        self.key_positions = torch.arange(config.context_length, device=device)
        self.position = 0
        self.mask: torch.Tensor | None = None  # (n_new, context_length): which stored keys each query sees

    @classmethod
    def for_model(cls, model: torch.nn.Module, batch_size: int) -> KVCache:
        """A cache on the model's device and in its parameters' dtype."""
        weight = next(model.parameters())
        return cls(model.config, batch_size, device=weight.device, dtype=weight.dtype)

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)

    def reset(self) -> None:
        """Forget the stored positions; the buffers are reused, so no memory is allocated."""
        self.position = 0
        self.mask = None

    def begin(self, n_new: int, batch_size: int) -> None:
        """Check that n_new more positions fit, and build the attention mask the layers share for them."""
        if batch_size != self.batch_size:
            raise ConfigError(f"KVCache was allocated for batch size {self.batch_size}, got {batch_size}")
        if self.position + n_new > self.context_length:
            total = self.position + n_new
            raise ConfigError(
                f"KV cache is full: {self.position} positions stored + {n_new} new = {total}, "
                f"more than context_length={self.context_length}"
            )
        # Query i sits at position `position + i` and may see every stored key at or before it. Attention runs
        # over the whole preallocated buffer (a static shape); unwritten slots are masked out.
        query_positions = self.position + torch.arange(n_new, device=self.key_positions.device)
        self.mask = self.key_positions[None, :] <= query_positions[:, None]

    def store(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Write new keys and values (batch, n_kv_heads, n_new, head_dim) in place; return full buffers."""
        end = self.position + k.shape[2]
        self.keys[layer][:, :, self.position : end] = k
        self.values[layer][:, :, self.position : end] = v
        return self.keys[layer], self.values[layer]

    def advance(self, n_new: int) -> None:
        self.position += n_new


def kv_cache_bytes_per_token(
    config: GPTConfig | None = None,
    *,
    n_layers: int | None = None,
    n_kv_heads: int | None = None,
    head_dim: int | None = None,
    bytes_per_number: int = 4,
) -> int:
    """2 x layers x KV heads x head dim x bytes per number: one key and one value per KV head per layer (000).

    Pass a GPTConfig, explicit sizes, or both (explicit sizes win), e.g. Llama 3 8B in bf16:
    kv_cache_bytes_per_token(n_layers=32, n_kv_heads=8, head_dim=128, bytes_per_number=2) == 128 * 1024.
    """
    if config is not None:
        n_layers = config.n_layers if n_layers is None else n_layers
        n_kv_heads = config.resolved_kv_heads if n_kv_heads is None else n_kv_heads
        head_dim = config.resolved_head_dim if head_dim is None else head_dim
    missing = [
        name
        for name, value in (("n_layers", n_layers), ("n_kv_heads", n_kv_heads), ("head_dim", head_dim))
        if value is None
    ]
    if missing:
        raise ConfigError(f"kv_cache_bytes_per_token needs a config or explicit {', '.join(missing)}")
    return 2 * n_layers * n_kv_heads * head_dim * bytes_per_number
