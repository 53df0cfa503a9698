"""The character LSTM of 003's baseline ladder, as a model family beside the GPT (``model=lstm``).

003 compares its GPT with "the character LSTM" of an earlier post: about 380,000 parameters, trained for 3,000
steps of 64 windows of 128 characters, scored with its state carried through the whole held-out text. Here it
is one embedding, a stacked ``torch.nn.LSTM`` and an untied output layer: at the default sizes (embedding 64,
hidden 256, one layer) and 003's vocabulary of 148 that is 377,236 parameters.

It speaks the GPT's interface so the same LightningModule, optimizer, checkpoints, sampler and metric serve
it: ``forward(idx, cache=None)`` returns a :class:`GPTOutput` (``aux_loss`` 0), and a cache is an
:class:`LSTMState` holding the (h, c) state, which generation advances one token at a time and scoring
carries from one chunk of text to the next (tinygpt/baselines/lstm.py). Without a cache each call starts
from the zero state, which is how it trains (random windows) and how the Trainer's dev score windows see it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tinygpt.common.errors import ConfigError, require
from tinygpt.model.gpt import GPTOutput
from tinygpt.model.kernels import Dropout
from tinygpt.model.speed import DEFAULT, SpeedConfig


@dataclass
class LSTMConfig:
    family: str = "lstm"
    vocab_size: int = 0  # 0 = not known yet; filled from the tokenizer before the model is built
    context_length: int = 128  # the training window (003: 128), and the dev score's window
    d_embed: int = 64
    d_model: int = 256  # hidden (and cell) size
    n_layers: int = 1
    dropout: float = 0.0  # between stacked layers and before the output layer; 003's LSTM had none

    def __post_init__(self) -> None:
        require(self.family == "lstm", "LSTMConfig.family", self.family, "'lstm'")
        for name in ("context_length", "d_embed", "d_model", "n_layers"):
            require(getattr(self, name) > 0, f"LSTMConfig.{name}", getattr(self, name), "a positive integer")
        require(
            self.vocab_size >= 0,
            "LSTMConfig.vocab_size",
            self.vocab_size,
            "a positive integer (or 0 until the tokenizer fills it in)",
        )
        require(0.0 <= self.dropout < 1.0, "LSTMConfig.dropout", self.dropout, "a probability in [0, 1)")

    def build(self, speed: SpeedConfig = DEFAULT) -> CharLSTM:
        """The LSTM this config describes (its dropout masks as ``speed`` says)."""
        return CharLSTM(self, speed)


class LSTMState:
    """The recurrent state carried between calls: (h, c), each (n_layers, B, d_model), None before the first.
    ``position`` counts the tokens consumed, as a KV cache's does."""

    def __init__(self) -> None:
        self.hc: tuple[torch.Tensor, torch.Tensor] | None = None
        self.position = 0

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep the states of rows ``rows`` (a beam search's kept beams, each from the row it continues)."""
        if self.hc is not None:
            self.hc = (self.hc[0].index_select(1, rows), self.hc[1].index_select(1, rows))


class CharLSTM(nn.Module):
    def __init__(self, config: LSTMConfig, speed: SpeedConfig = DEFAULT):
        super().__init__()
        if config.vocab_size <= 0:
            raise ConfigError(
                f"LSTMConfig.vocab_size={config.vocab_size} is not allowed when building a model: "
                "must be the tokenizer's vocabulary size (a positive integer)"
            )
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.d_embed)
        self.lstm = nn.LSTM(
            config.d_embed,
            config.d_model,
            num_layers=config.n_layers,
            batch_first=True,
            dropout=config.dropout if config.n_layers > 1 else 0.0,
        )
        # speed.dropout applies (the rest of the switches are the GPT's); nn.LSTM's own between layers is torch's
        self.drop = Dropout(config.dropout, speed.dropout)
        self.head = nn.Linear(config.d_model, config.vocab_size)
        # what training steps call: speed.compile compiles the trunk whole (no repeated block to compile once)
        self.train_features = torch.compile(self.features) if speed.compile else self.features

    has_aux_loss = False  # features() returns a zero auxiliary loss, as the GPT's interface asks

    def new_cache(self, batch_size: int) -> LSTMState:
        """An empty state for generation (tinygpt.model.generate asks a model for its cache this way)."""
        return LSTMState()

    def forward(self, idx: torch.Tensor, cache: LSTMState | None = None) -> GPTOutput:
        """idx: (B, T) token ids. With a cache, the tokens continue its state, and the state is advanced."""
        hidden, aux = self.features(idx, cache)
        return GPTOutput(F.linear(hidden, self.head_weight, self.head_bias), aux)

    def features(self, idx: torch.Tensor, cache: LSTMState | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The hidden states the head reads (B, T, d_model), after dropout, and a zero auxiliary loss: the
        interface the GPT offers, so the training loss can be fused with the head (tinygpt/model/kernels.py)."""
        out, hc = self.lstm(self.embedding(idx), None if cache is None else cache.hc)
        if cache is not None:
            cache.hc = hc
            cache.position += idx.shape[1]
        hidden = self.drop(out)
        return hidden, hidden.new_zeros(())

    @property
    def head_weight(self) -> torch.Tensor:
        return self.head.weight

    @property
    def head_bias(self) -> torch.Tensor:
        return self.head.bias

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self) -> int:
        """Training FLOPs per token, 6 per weight as for the GPT (there is no attention term)."""
        return 6 * self.num_parameters()
