"""Training batches are a pure function of (seed, step): shared across model variants, resumable."""

from __future__ import annotations

import itertools
import random

import lightning as L
import pytest
import torch

from tinygpt.data import DataError, RandomWindows, TextDataModule, TrainBatches

TOKENS = torch.arange(5000) % 251


def take(batches: TrainBatches, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return list(itertools.islice(iter(batches), n))


def same(a, b) -> bool:
    return all(torch.equal(x, y) for (x1, y1), (x2, y2) in zip(a, b, strict=True) for x, y in ((x1, x2), (y1, y2)))


def variant_a():
    return torch.nn.Sequential(torch.nn.Embedding(251, 16), torch.nn.Linear(16, 251))


def variant_b():
    return torch.nn.Sequential(torch.nn.Embedding(251, 64), torch.nn.GRU(64, 64, batch_first=True))


def run_variant(make_model, seed: int, steps: int = 5):
    """What a training run does before and between its batches: seed, build a model, use the global RNG."""
    torch.manual_seed(seed)
    make_model()
    seen = []
    for x, y in take(TrainBatches(RandomWindows(TOKENS, 8, 32, seed)), steps):
        torch.rand(1000)  # dropout and friends consume the global RNG between steps
        seen.append((x, y))
    return seen


def test_two_model_variants_with_the_same_seed_see_the_same_batches():
    assert same(run_variant(variant_a, seed=1), run_variant(variant_b, seed=1))


def test_another_seed_gives_other_batches():
    a, b = run_variant(variant_a, seed=1), run_variant(variant_a, seed=2)
    assert not any(torch.equal(x1, x2) for (x1, _), (x2, _) in zip(a, b, strict=True))


def test_consecutive_steps_differ_and_seeds_do_not_alias_steps():
    windows = {seed: RandomWindows(TOKENS, 8, 32, seed) for seed in (0, 1)}
    assert not torch.equal(windows[0].batch(0)[0], windows[0].batch(1)[0])
    assert not torch.equal(windows[0].batch(1)[0], windows[1].batch(0)[0])


def test_windows_are_t_plus_one_tokens_shifted_by_one():
    x, y = RandomWindows(torch.arange(1000), 16, 32, seed=0).batch(7)
    assert x.shape == y.shape == (16, 32) and x.dtype == y.dtype == torch.long
    assert torch.equal(y, x + 1)  # on arange tokens, a target is its input + 1
    assert int(y.max()) <= 999


def test_a_text_of_exactly_one_window_gives_that_window():
    x, y = RandomWindows(torch.arange(33), 4, 32, seed=5).batch(0)
    assert torch.equal(x, torch.arange(32).expand(4, 32)) and torch.equal(y, torch.arange(1, 33).expand(4, 32))
    with pytest.raises(ValueError, match="fewer than one window"):
        RandomWindows(torch.arange(32), 4, 32, seed=0)


def test_a_stream_started_at_k_is_the_tail_of_one_started_at_0():
    windows = RandomWindows(TOKENS, 4, 16, seed=3)
    assert same(take(TrainBatches(windows, start=0), 9)[4:], take(TrainBatches(windows, start=4), 5))


def test_the_start_is_read_when_iteration_begins():
    windows = RandomWindows(TOKENS, 4, 16, seed=3)
    step = {"now": 0}
    batches = TrainBatches(windows, start=lambda: step["now"])
    step["now"] = 6  # e.g. Lightning restored a checkpoint after the loader was built
    assert same(take(batches, 2), [windows.batch(6), windows.batch(7)])


def test_ranks_split_one_global_batch():
    whole = RandomWindows(TOKENS, 8, 16, seed=0).batch(3)[0]
    parts = [RandomWindows(TOKENS, 4, 16, seed=0, rank=r, world_size=2).batch(3)[0] for r in (0, 1)]
    assert torch.equal(torch.cat(parts), whole)


class Recorder(L.LightningModule):
    def __init__(self, vocab: int):
        super().__init__()
        self.layer = torch.nn.Embedding(vocab, vocab)
        self.seen: list[list[int]] = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        self.seen.append(x[:, :4].flatten().tolist())
        return torch.nn.functional.cross_entropy(self.layer(x).flatten(0, 1), y.flatten())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(datamodule, steps: int, root, ckpt_path=None, save_every: int | None = None) -> list[list[int]]:
    callbacks = []
    if save_every:
        callbacks.append(L.pytorch.callbacks.ModelCheckpoint(root / "ckpt", every_n_train_steps=save_every))
    module = Recorder(datamodule.vocab_size)
    trainer = L.Trainer(
        max_steps=steps,
        max_epochs=-1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=bool(save_every),
        callbacks=callbacks,
        limit_val_batches=0,
        default_root_dir=root,
    )
    trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
    return module.seen


@pytest.mark.filterwarnings("ignore")  # Lightning's own notices about checkpoints and pytrees
def test_lightning_resume_continues_the_same_batch_stream(tmp_path):
    rng = random.Random(0)
    (tmp_path / "c.txt").write_text(" ".join(rng.choice("ab cd ef gh the of".split()) for _ in range(800)))
    data = {"root": str(tmp_path), "name": "textfile", "path": "c.txt", "batch_size": 2}

    def datamodule(seed=0):
        return TextDataModule(data, context_length=8, seed=seed)

    straight = fit(datamodule(), 6, tmp_path / "a")
    first = fit(datamodule(), 3, tmp_path / "b", save_every=3)
    (checkpoint,) = (tmp_path / "b" / "ckpt").glob("*.ckpt")
    resumed = fit(datamodule(), 6, tmp_path / "c", ckpt_path=checkpoint)
    assert first + resumed == straight
    with pytest.raises(DataError, match="seed=0 using seed=1"):
        fit(datamodule(seed=1), 6, tmp_path / "d", ckpt_path=checkpoint)


def test_the_datamodule_reads_the_start_step_lazily(tmp_path):
    (tmp_path / "c.txt").write_text("abcdefgh " * 300)
    dm = TextDataModule({"root": str(tmp_path), "name": "textfile", "path": "c.txt"}, context_length=8, seed=2)
    loader = dm.train_dataloader()
    dm.start_step = 5  # what a restored Trainer's global step does, after the loader was made
    x, y = next(iter(loader))
    expected_x, expected_y = dm.train_batches.batch(5)
    assert torch.equal(x, expected_x) and torch.equal(y, expected_y)


def test_loaders_leave_the_global_rng_alone(tmp_path):
    """Dropout draws from torch's global RNG: iterating the data must not move it, or exact resume breaks."""
    (tmp_path / "c.txt").write_text("abcdefgh " * 300)
    dm = TextDataModule({"root": str(tmp_path), "name": "textfile", "path": "c.txt"}, context_length=8, seed=2)
    state = torch.get_rng_state()
    next(iter(dm.train_dataloader()))
    list(dm.val_dataloader())
    list(dm.test_dataloader())
    assert torch.equal(torch.get_rng_state(), state)
