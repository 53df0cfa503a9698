"""Before a run or a sweep makes any folder: the data root exists and the named corpus is there (or fetched).

Hydra makes a job's folder, its ``.hydra/`` and its log file before the task function runs, and a sweep its
folder before the first job; a corpus found missing inside training would leave them behind, around a
traceback, and a sweep would fail the same way once per job. This Hydra callback runs first
(``on_run_start``, ``on_multirun_start``), resolves the data root and fetches what is missing of a named corpus
(tinygpt/data/download.py), opens the corpus (the files are there, the glob matches, the text is UTF-8), and on
failure ends the command with one line, naming the corpus, the folder looked
in, the URL tried and how to point at a local copy: nothing is written. A sweep whose jobs choose other corpora
(``data=peps,shakespeare``) has each job's corpus checked when it starts.
"""

from __future__ import annotations

import traceback
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from tinygpt.common.say import fail, full_errors
from tinygpt.common.typed import typed
from tinygpt.data.config import DataConfig
from tinygpt.data.corpus import open_corpus
from tinygpt.data.errors import DataError
from tinygpt.data.root import resolve_data_root


def check_data(data: Any) -> None:
    """Raise DataError in one line when the data root is missing, a named corpus's files cannot be had, or the
    corpus cannot be read: a missing file or folder, a glob that matches nothing, a file that is not UTF-8, an
    empty corpus. Opening it reads each file once (the UTF-8 check); the run reads it again when it starts."""
    config = typed(DataConfig, data, "data", DataError)
    open_corpus(config, resolve_data_root(config.root))


class DataPreflight(Callback):
    def _check(self, config: DictConfig) -> None:
        try:
            check_data(config.data)
        except DataError as err:
            if full_errors():  # HYDRA_FULL_ERROR=1: the traceback too (docs/runs.md); Hydra would swallow a raise
                traceback.print_exc()  # from a callback as a warning and go on to make the job's folder
            raise fail(str(err)) from None

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self._check(config)
