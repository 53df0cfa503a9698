"""The GPT: token embedding, optional position table, L blocks, a final norm and the (tied) unembedding."""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from tinygpt.common.errors import ConfigError
from tinygpt.model.block import Block
from tinygpt.model.config import GPTConfig
from tinygpt.model.implementation import DEFAULT, Implementation
from tinygpt.model.kv_cache import KVCache
from tinygpt.model.norm import NORM_TYPES, make_norm
from tinygpt.model.position import POSITIONS


class GPTOutput(NamedTuple):
    logits: torch.Tensor  # (B, T, vocab_size)
    aux_loss: torch.Tensor  # 0-dim: weighted MoE load-balancing loss, summed over layers; 0 for dense models


class GPT(nn.Module):
    def __init__(self, config: GPTConfig, implementation: Implementation = DEFAULT):
        """implementation: how its modules compute (tinygpt/model/implementation.py), never what they hold."""
        super().__init__()
        if config.vocab_size <= 0:
            raise ConfigError(
                f"GPTConfig.vocab_size={config.vocab_size} is not allowed when building a model: must be the "
                "tokenizer's vocabulary size (a positive integer), e.g. model.vocab_size=148"
            )
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        # the encoding model.position names (tinygpt/model/position.py); only the learned table has parameters,
        # saved as position_embedding.table.weight
        self.position_embedding = POSITIONS[config.position](config)
        self.blocks = nn.ModuleList(Block(config, i, implementation) for i in range(config.n_layers))
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
        if isinstance(module, NORM_TYPES):
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

    @property
    def has_aux_loss(self) -> bool:
        """Whether features() can return a non-zero auxiliary loss (an MLP with one, e.g. a mixture of experts)."""
        return any(block.mlp.has_aux_loss for block in self.blocks)

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
            raise ConfigError(f"input of {T} tokens is longer than context_length={limit}")
        x = self.token_embedding(idx)
        positions = self.position_embedding
        table = positions.embeddings(start, T, idx.device)
        if table is not None:
            x = x + table
        rope = positions.rotary(start, T)
        # with a cache, attention runs over the cache's whole fixed-length buffer of keys
        attn_bias = positions.attention_bias(start, T, T if cache is None else cache.context_length)
        aux_losses = []
        for block in self.blocks:
            x, aux_loss = block(x, rope, cache, attn_bias)
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
