"""Score a model on sliding-window batches, standalone (outside Lightning)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from tinygpt.common.modes import eval_mode
from tinygpt.common.progress import Progress
from tinygpt.metrics.bits_per_byte import BitsPerByte


def logits_of(output) -> torch.Tensor:
    """A model may return the logits or an object carrying them (tinygpt's GPT returns a NamedTuple)."""
    return output if isinstance(output, torch.Tensor) else output.logits


@torch.no_grad()
def score(
    model_fn: Callable[[torch.Tensor], object],
    dataloader: Iterable[dict[str, torch.Tensor]],
    device: torch.device | str = "cpu",
    n_documents: int = 0,
    what: str = "scoring",
) -> dict:
    """Bits per byte (and per token, per char, loss, counts) of model_fn over the dataloader's windows.

    model_fn(input Long[B, T]) -> logits [B, T, V] (or an object with .logits). An nn.Module is put in eval
    mode for the scoring and restored afterwards. Returns Python floats, and per-document lists when
    n_documents > 0. A scoring that passes a few seconds says how far it is (``what``: which split).
    """
    device = torch.device(device)
    metric = BitsPerByte(n_documents=n_documents).to(device)
    progress = Progress(what, len(dataloader) if hasattr(dataloader, "__len__") else None)
    with eval_mode(model_fn):
        for done, batch in enumerate(dataloader):
            progress.update(done)
            batch = {key: value.to(device) for key, value in batch.items()}
            logits = logits_of(model_fn(batch["input"]))
            metric.update(
                logits,
                batch["target"],
                batch["scored"],
                batch["target_bytes"],
                batch["target_chars"],
                batch.get("target_doc"),
            )
    return {key: value.tolist() if value.dim() else float(value) for key, value in metric.compute().items()}
