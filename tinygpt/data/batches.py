"""Training batches: B random windows of T+1 tokens, a pure function of (seed, step).

Why counter-based sampling rather than one torch.Generator carried through the run:
- Every model variant with the same seed must see the same batches (000 and 003 compare variants on shared
  batches). Batch s is drawn from a generator seeded from (seed, s) alone, so nothing else, not the model's
  initialisation, not torch's global RNG, not dropout, can shift the stream.
- Exact resume. Lightning prefetches the next batch before running the current step, so a single running
  generator's state at checkpoint time would already be one batch ahead of the step being saved, and a resumed
  run would skip a batch. With the batch a function of the step number, resuming at global step k just starts
  the stream at k: the "generator state" to checkpoint is the seed and the step (Lightning saves the step).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import numpy as np
import torch
from torch.utils.data import IterableDataset

from tinygpt.common.errors import ConfigError
from tinygpt.data.window_reads import WindowReads

SAMPLER_VERSION = "counter-v1"  # bump if the (seed, step) -> batch function ever changes


def generator_for_step(seed: int, step: int) -> torch.Generator:
    """A torch.Generator seeded from (seed, step) through numpy's SeedSequence, which mixes the two into a
    well-spread 63-bit seed (seeding with seed + step would make run 0's step 1 equal run 1's step 0)."""
    if seed < 0 or step < 0:
        raise ConfigError(f"seed and step must be >= 0, got seed={seed}, step={step}")
    state = np.random.SeedSequence([seed, step]).generate_state(1, dtype=np.uint64)[0]
    return torch.Generator().manual_seed(int(state) >> 1)


class RandomWindows:
    """Random windows of context_length + 1 tokens from one sequence of token ids: a tensor, or a numpy array such
    as a prepared folder's memory-mapped train split (tinygpt/data/prepared.py), of which a batch reads only the
    windows it draws: from the file with ``preadv``, all of a batch's pages asked for at once (window_reads.py says
    why). The same ids give the same batches either way.

    batch(step) -> (x, y), each Long[batch_size, context_length], y = x shifted by one token. With
    world_size > 1, the B * world_size windows of a step are drawn once and rank r takes its slice, so the
    global batch does not depend on how many devices share it.
    """

    def __init__(
        self,
        tokens: torch.Tensor | np.ndarray,
        batch_size: int,
        context_length: int,
        seed: int,
        *,
        rank: int = 0,
        world_size: int = 1,
    ):
        if tokens.ndim != 1:
            raise ConfigError(f"tokens must be 1-D, got shape {tuple(tokens.shape)}")
        if len(tokens) < context_length + 1:
            raise ConfigError(
                f"{len(tokens)} tokens are fewer than one window of context_length + 1 = {context_length + 1}"
            )
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank {rank} is not in [0, world_size={world_size})")
        self.tokens = tokens
        self.batch_size = batch_size
        self.context_length = context_length
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self._offsets = torch.arange(context_length + 1)
        self._reads = WindowReads.of(tokens)

    def starts(self, step: int) -> torch.Tensor:
        """The first token of each of this rank's windows at ``step``: Long[batch_size]."""
        B = self.batch_size
        generator = generator_for_step(self.seed, step)
        starts = torch.randint(0, len(self.tokens) - self.context_length, (B * self.world_size,), generator=generator)
        return starts[self.rank * B : (self.rank + 1) * B]

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        starts = self.starts(step)
        if self._reads is not None:  # a file's map: its windows asked for together, then read (window_reads.py)
            self._reads.ask(starts.numpy(), self.context_length + 1)
            windows = torch.from_numpy(self._reads.read(starts.numpy(), self.context_length + 1).astype(np.int64))
        else:
            index = starts[:, None] + self._offsets  # [B, T+1]: one gather
            if isinstance(self.tokens, np.ndarray):
                windows = torch.from_numpy(self.tokens[index.numpy()].astype(np.int64))
            else:
                windows = self.tokens[index].long()
        return windows[:, :-1], windows[:, 1:]


class TrainBatches(IterableDataset):
    """Yields windows.batch(s) for s = start, start + 1, ... forever.

    `start` may be a callable, read when iteration begins: after Lightning restores a checkpoint it creates
    a fresh iterator, and the stream then continues at the restored step instead of starting again at 0.
    """

    def __init__(self, windows: RandomWindows, start: int | Callable[[], int] = 0):
        super().__init__()
        self.windows = windows
        self.start = start

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        first = self.start() if callable(self.start) else self.start
        for step in itertools.count(int(first)):
            yield self.windows.batch(step)
