"""tinygpt's Python API: compose a config, train it, load a checkpoint, sample, score text, build the Lightning parts.

Every call here is what the command-line programs do, reached from Python (a notebook, a script of one's own):
``compose`` is the composition ``tinygpt-train`` makes from the same overrides (the package's configs, plus a
folder of one's own with ``config_dir``), ``train`` is its run (the same run folder, run.json, checkpoints and
exact resume), ``load`` reads any tinygpt checkpoint into its model and tokenizer, and ``build`` gives the
``LightningModule`` and ``LightningDataModule`` that ``train`` trains, for a ``lightning.Trainer`` of one's own.
docs/python_api.md shows each in use.
"""

from tinygpt.api.calls import build, compose, generate, load, score_continuation, score_text, train

__all__ = ["build", "compose", "generate", "load", "score_continuation", "score_text", "train"]
