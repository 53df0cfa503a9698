"""A mapped file's windows are read with preadv (the ids of indexing the map), all of a batch's pages asked for
first."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tinygpt.data import DataError, RandomWindows
from tinygpt.data.window_reads import WindowReads

HEADER = 1024  # an llm.c shard's header: the ids start after it


def mapped_file(path, dtype: np.dtype) -> tuple[np.memmap, np.ndarray]:
    """A file of 50,000 ids after a header, mapped as tinygpt maps a prepared folder's train.ids (or a shard)."""
    ids = (np.arange(50_000, dtype=np.int64) * 7919 % (2**16 if dtype.itemsize == 2 else 2**20)).astype(dtype)
    path.write_bytes(b"\xff" * HEADER + ids.tobytes())
    return np.memmap(path, dtype=dtype, mode="r", offset=HEADER, shape=(ids.size,)), ids


@pytest.fixture(params=["<u2", "<u4"])
def mapped(tmp_path, request):
    return mapped_file(tmp_path / "train.ids", np.dtype(request.param))


def test_the_windows_read_are_the_ids_of_the_map_and_of_the_same_ids_in_memory(mapped):
    tokens, ids = mapped
    reads = WindowReads.of(tokens)
    assert reads is not None and reads.offset == HEADER
    starts = np.array([0, 1, 12_345, ids.size - 65])
    assert np.array_equal(reads.read(starts, 65), ids[starts[:, None] + np.arange(65)])
    from_file, in_memory = (
        RandomWindows(tokens, 8, 64, seed=3),
        RandomWindows(torch.from_numpy(ids.astype(np.int64)), 8, 64, seed=3),
    )
    assert from_file._reads is not None and in_memory._reads is None
    for step in (0, 1, 2, 9, 3):  # in order, a jump, and back
        for got, want in zip(from_file.batch(step), in_memory.batch(step), strict=True):
            assert got.dtype == torch.long and torch.equal(got, want)
    for rank in (0, 1):  # a DDP rank reads its share of the step's windows, as in memory
        got = RandomWindows(tokens, 4, 64, seed=3, rank=rank, world_size=2).batch(5)[0]
        assert torch.equal(
            got, RandomWindows(torch.from_numpy(ids.astype(np.int64)), 4, 64, 3, rank=rank, world_size=2).batch(5)[0]
        )


def test_only_a_whole_files_map_is_read_from_the_file(mapped):
    tokens, _ = mapped
    assert WindowReads.of(tokens[10:]) is None  # a slice keeps its parent's offset: indexed, not read
    assert WindowReads.of(np.asarray(tokens)) is None and WindowReads.of(torch.zeros(5)) is None


def test_a_batch_asks_for_all_its_windows_pages_before_it_reads_them(mapped, monkeypatch):
    tokens, _ = mapped
    windows = RandomWindows(tokens, 8, 64, seed=3)
    calls = []
    read = windows._reads.read
    monkeypatch.setattr(windows._reads, "ask", lambda starts, length: calls.append(("ask", starts.tolist(), length)))

    def reading(starts, length):
        calls.append(("read", starts.tolist(), length))
        return read(starts, length)

    monkeypatch.setattr(windows._reads, "read", reading)
    for step in (0, 1, 7):
        calls.clear()
        windows.batch(step)
        starts = windows.starts(step).tolist()
        assert calls == [("ask", starts, 65), ("read", starts, 65)], step


def test_a_file_cut_short_after_it_was_mapped_is_refused_naming_it(tmp_path):
    tokens, ids = mapped_file(tmp_path / "train.ids", np.dtype("<u2"))
    reads = WindowReads.of(tokens)
    del tokens  # its pages past the new end would fault if anything read the map
    with open(tmp_path / "train.ids", "r+b") as f:
        f.truncate(HEADER + (ids.size - 100) * ids.dtype.itemsize)
    with pytest.raises(DataError, match=r"train\.ids is shorter than when it was opened .* prepare it again"):
        reads.read(np.array([ids.size - 65]), 65)
