"""The GPT: token embedding, optional position table, L blocks, a final norm and the (tied) unembedding."""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .block import Block
from .config import GPTConfig
from .kv_cache import KVCache
from .norm import LayerNorm, RMSNorm, make_norm
from .position import LearnedPositions, SinusoidalPositions, rope_angles


class GPTOutput(NamedTuple):
    logits: torch.Tensor  # (B, T, vocab_size)
    aux_loss: torch.Tensor  # 0-dim: weighted MoE load-balancing loss, summed over layers; 0 for dense models


class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        if config.vocab_size <= 0:
            raise ValueError(
                f"GPTConfig.vocab_size={config.vocab_size} is not allowed when building a model: must be the "
                "tokenizer's vocabulary size (a positive integer), e.g. model.vocab_size=148")
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embedding: nn.Module | None = None
        if config.position == "learned":
            self.position_embedding = LearnedPositions(config.context_length, config.d_model)
        elif config.position == "sinusoidal":
            self.position_embedding = SinusoidalPositions(config.context_length, config.d_model)
        self.use_rope = config.position == "rope"
        if self.use_rope:
            cos, sin = rope_angles(config.resolved_head_dim, config.context_length, config.rope_base)
            # Buffers move with .to(device) but are not trained; persistent=False keeps them out of
            # checkpoints, since they can always be recomputed (000).
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.n_layers))
        self.final_norm = make_norm(config.norm, config.d_model, config.norm_eps, config.bias)
        # Tied: the unembedding is the embedding table, transposed (Press and Wolf, 2017); never a bias.
        self.lm_head = None
        if not config.tie_embeddings:
            self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        # Every weight at N(0, init_std), without GPT-2's extra scaling of the residual projections (003).
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=self.config.init_std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, (LayerNorm, RMSNorm)):
            nn.init.ones_(module.weight)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor, cache: KVCache | None = None) -> GPTOutput:
        """idx: (B, T) token ids. With a cache, idx holds only the new tokens; they continue its positions."""
        x, aux = self.features(idx, cache)
        return GPTOutput(F.linear(x, self.head_weight), aux)

    @property
    def head_weight(self) -> torch.Tensor:
        """The unembedding matrix (V, d): the head's weight, or the embedding table when tied."""
        return self.lm_head.weight if self.lm_head is not None else self.token_embedding.weight

    # no GPT head has a bias (tied or not); the LSTM's has one. Every family offers both (module.py reads them)
    head_bias = None

    def features(self, idx: torch.Tensor, cache: KVCache | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The final-norm hidden states (B, T, d) and the MoE loss: everything but the head, so that a loss
        can be fused with the head (tinygpt/model/fused_loss.py) without materialising the logits."""
        B, T = idx.shape
        start = 0 if cache is None else cache.position
        if cache is not None:
            cache.begin(T, B)
        elif T > self.config.context_length:
            limit = self.config.context_length
            raise ValueError(f"input of {T} tokens is longer than context_length={limit}")
        x = self.token_embedding(idx)
        if self.position_embedding is not None:
            x = x + self.position_embedding(torch.arange(start, start + T, device=idx.device))
        rope = (self.rope_cos[start:start + T], self.rope_sin[start:start + T]) if self.use_rope else None
        aux_losses = []
        for block in self.blocks:
            x, aux_loss = block(x, rope, cache)
            if aux_loss is not None:
                aux_losses.append(aux_loss)
        if cache is not None:
            cache.advance(T)
        x = self.final_norm(x)
        if aux_losses:
            aux = self.config.moe_aux_loss_weight * torch.stack(aux_losses).sum()
        else:
            aux = x.new_zeros(())
        return x, aux

    def num_parameters(self) -> int:
        """Every trainable number, the tied embedding counted once."""
        return sum(p.numel() for p in self.parameters())
