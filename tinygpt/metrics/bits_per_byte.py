"""Bits per byte as a torchmetrics Metric.

Bits per byte = total bits the model pays for the scored tokens / UTF-8 bytes of the text those tokens cover.
Dividing by the bytes of the original text, not by tokens, is what makes models with different tokenizers
comparable (003). Sums are kept in float64 on the logits' device, and summed across processes.

Use from a LightningModule: call update(logits, **batch-fields) in validation_step and, at epoch end,
log compute()["bits_per_byte"] (compute returns a dict, so pass the number to self.log, not the metric).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torchmetrics import Metric

from tinygpt.common.errors import ConfigError
from tinygpt.metrics.units import LN2


class BitsPerByte(Metric):
    is_differentiable = False
    higher_is_better = False
    full_state_update = False

    def __init__(self, n_documents: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.n_documents = n_documents
        self.add_state("bits", torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("tokens", torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("bytes", torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("chars", torch.zeros((), dtype=torch.float64), dist_reduce_fx="sum")
        if n_documents > 0:
            self.add_state("document_bits", torch.zeros(n_documents, dtype=torch.float64), dist_reduce_fx="sum")
            self.add_state("document_bytes", torch.zeros(n_documents, dtype=torch.float64), dist_reduce_fx="sum")

    def update(
        self,
        logits: torch.Tensor,
        target: torch.Tensor,
        scored: torch.Tensor,
        target_bytes: torch.Tensor,
        target_chars: torch.Tensor,
        target_doc: torch.Tensor | None = None,
    ) -> None:
        """logits [B, T, V]; the rest [B, T], as produced by the sliding-window batches."""
        vocab = logits.shape[-1]
        mask = scored.reshape(-1).to(logits.device)
        # Only the scored rows go through the softmax: a big vocabulary over a whole batch is a lot of memory.
        rows = logits.reshape(-1, vocab)[mask]
        if rows.dtype not in (torch.float32, torch.float64):
            rows = rows.float()
        nats = F.cross_entropy(rows, target.reshape(-1).to(logits.device)[mask], reduction="none")
        bits = nats.double() / LN2
        scored_bytes = target_bytes.reshape(-1).to(logits.device)[mask].double()
        self.bits += bits.sum()
        self.tokens += float(bits.numel())
        self.bytes += scored_bytes.sum()
        self.chars += target_chars.reshape(-1).to(logits.device)[mask].double().sum()
        if self.n_documents > 0:
            if target_doc is None:
                raise ConfigError("BitsPerByte(n_documents > 0) needs target_doc in update()")
            doc = target_doc.reshape(-1).to(logits.device)[mask].long()
            self.document_bits.index_add_(0, doc, bits)
            self.document_bytes.index_add_(0, doc, scored_bytes)

    def compute(self) -> dict[str, torch.Tensor]:
        result = {
            "bits_per_byte": self.bits / self.bytes,
            "bits_per_token": self.bits / self.tokens,
            "bits_per_char": self.bits / self.chars,
            "loss": self.bits * LN2 / self.tokens,  # nats per token: the training loss's units
            "bits": self.bits,
            "tokens": self.tokens,
            "bytes": self.bytes,
            "chars": self.chars,
        }
        if self.n_documents > 0:
            result["per_document_bits"] = self.document_bits
            result["per_document_bytes"] = self.document_bytes
        return result
