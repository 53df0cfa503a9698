"""The cost of every scored token, in bits: what the per-document, repeats and unseen-character analyses sum.

The bits-per-byte metric only keeps totals; these functions keep one number per token, computed exactly as
the metric scores (the same sliding windows, the same first-token exclusion), so that their sum over the
scored tokens is the metric's total (tests/test_analysis_costs.py checks it).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from tinygpt.common.errors import ConfigError
from tinygpt.common.modes import eval_mode
from tinygpt.data.encoded import EncodedText
from tinygpt.data.windows import SlidingWindowDataset
from tinygpt.metrics.scoring import logits_of
from tinygpt.metrics.units import LN2


@torch.no_grad()
def window_bits(
    model, encoded: EncodedText, context_length: int, device: str = "cpu", batch_size: int = 32
) -> np.ndarray:
    """Bits of every token of `encoded` under the GPT's scoring windows; token 0 is not scored (0)."""
    dataset = SlidingWindowDataset(encoded.ids, encoded.token_bytes, encoded.token_chars, context_length)
    bits = np.zeros(len(encoded), dtype=np.float64)
    with eval_mode(model):
        for first in range(0, len(dataset), batch_size):
            index = list(range(first, min(first + batch_size, len(dataset))))
            batch = next(iter(DataLoader([dataset[i] for i in index], batch_size=len(index))))
            logits = logits_of(model(batch["input"].to(device))).float()
            nats = F.cross_entropy(logits.flatten(0, 1), batch["target"].to(device).flatten(), reduction="none")
            nats = nats.view(len(index), -1).cpu().double().numpy()
            for row, w in enumerate(index):
                start, offset = dataset.windows.start(w), dataset.windows.score_from(w)
                bits[start + 1 + offset : start + 1 + context_length] = nats[row, offset:] / LN2
    return bits


@torch.no_grad()
def carried_state_bits(model, ids: torch.Tensor, chunk: int = 128, device: str = "cpu") -> np.ndarray:
    """Bits of every token of `ids` for a recurrent model whose state is carried through the whole text, fed
    `chunk` tokens at a time (003's LSTM scoring); token 0 is not scored (0). Equal to one pass over the
    whole text: the chunking only bounds memory (tests/test_model_lstm.py checks it)."""
    if chunk < 1:
        raise ConfigError(f"chunk={chunk} must be at least 1")
    cache = model.new_cache(1)
    ids = ids.long().to(device)
    bits = np.zeros(len(ids), dtype=np.float64)
    with eval_mode(model):
        for s in range(0, len(ids) - 1, chunk):
            x, y = ids[s : s + chunk], ids[s + 1 : s + chunk + 1]
            logits = logits_of(model(x[None, : len(y)], cache))[0].float()
            bits[s + 1 : s + 1 + len(y)] = (F.cross_entropy(logits, y, reduction="none") / LN2).cpu().double().numpy()
    return bits
