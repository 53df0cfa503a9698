"""A batch's windows read from a file of token ids with ``os.preadv``, all of their pages asked for at once first.

Why not index the memory map, as nanoGPT does: a batch's windows are random, so on a corpus of gigabytes nearly
every window touches pages the run has never touched, and on a mapped file each such page is a page fault, taken
one after another on the training loop's thread: from disk (a corpus larger than the page cache), each fault
waits for its own read before the next window's starts. Asking for the batch's pages first
(``posix_fadvise(WILLNEED)``, which starts their reads and returns) lets the disk serve them side by side. From
the page cache the two read at about the same rate; what the reads add there is memory: the pages a run has read
do not stay in its resident set, which over a long run on a large corpus would grow toward the file's size
(nanoGPT maps its file again every batch for this reason). The measurements, on disk and from the cache, are in
docs/benchmarks/data.md.

Each batch asks for its own pages only: asking for the next batches' too, to overlap their reads with the model's
step, made no measurable difference (docs/benchmarks/data.md). Only the reads change: the ids are those of
indexing the map (tests/test_data_window_reads.py), so batches, and resuming, are as before.
"""

from __future__ import annotations

import mmap
import os
import weakref

import numpy as np

from tinygpt.data.errors import DataError


class WindowReads:
    """Windows of a file of token ids mapped whole by ``numpy.memmap`` (a prepared folder's ``train.ids``, an
    llm.c shard after its header): read with ``preadv`` from the file the map names, in its dtype."""

    def __init__(self, tokens: np.memmap):
        self.path = str(tokens.filename)
        self.offset = int(tokens.offset)  # the file's byte where tokens[0] starts
        self.dtype = tokens.dtype
        self._fd: int | None = None
        self._pid = -1

    @staticmethod
    def of(tokens: object) -> WindowReads | None:
        """The reads for ``tokens`` when it is a whole file's map (``numpy.memmap`` as created, whose ``offset``
        and ``filename`` say where its ids are); None for anything else (a tensor, an array in memory, a slice or
        view of a map, whose ``offset`` would still be the whole map's), which is indexed as it is."""
        if (
            isinstance(tokens, np.memmap)
            and isinstance(tokens.base, mmap.mmap)
            and tokens.filename is not None
            and tokens.ndim == 1
            and tokens.flags.c_contiguous
        ):
            return WindowReads(tokens)
        return None

    def _file(self) -> int:
        """The file, opened once a process (a DDP rank started by fork would otherwise share its parent's)."""
        if self._fd is None or self._pid != os.getpid():
            self._fd = os.open(self.path, os.O_RDONLY)
            self._pid = os.getpid()
            weakref.finalize(self, os.close, self._fd)
        return self._fd

    def read(self, starts: np.ndarray, length: int) -> np.ndarray:
        """Ids [start, start + length) for each start: an array [len(starts), length] in the file's dtype."""
        fd, size = self._file(), self.dtype.itemsize
        out = np.empty((len(starts), length), dtype=self.dtype)
        want = length * size
        for row, start in enumerate(starts.tolist()):
            got = os.preadv(fd, [out[row]], self.offset + start * size)
            if got != want:
                raise DataError(
                    f"{self.path} is shorter than when it was opened (read {got} of {want} bytes at id "
                    f"{start:,}); it changed on disk: prepare it again"
                )
        return out

    def ask(self, starts: np.ndarray, length: int) -> None:
        """Tell the kernel these windows will be read soon: it starts reading the pages not in its cache and
        returns at once. A no-op where ``posix_fadvise`` is missing (macOS)."""
        if not hasattr(os, "posix_fadvise"):
            return
        fd, size = self._file(), self.dtype.itemsize
        for start in starts.tolist():
            os.posix_fadvise(fd, self.offset + start * size, length * size, os.POSIX_FADV_WILLNEED)
