"""A generated text sample at each validation, written to TensorBoard and kept for the run record.

A run that ends without a validation (no dev split, or a last step that was not a scoring step) samples once
when training ends, so every finished run records a sample."""

from __future__ import annotations

import lightning as L
import torch

from tinygpt.model import generate


class TextSampler(L.Callback):
    def __init__(
        self,
        prompt: str,
        max_new_tokens: int,
        temperature: float,
        top_k: int | None,
        seed: int,
        top_p: float | None = None,
    ):
        """The ``sample.*`` settings and the run's seed; the tokenizer is the data's, read in ``setup``."""
        self.tokenizer = None
        self.prompt = prompt
        self.max_new_tokens = max_new_tokens
        self.temperature = temperature
        self.top_k, self.top_p = top_k, top_p
        self.seed = seed
        self.last_sample: str | None = None

    def setup(self, trainer, pl_module, stage):
        self.tokenizer = trainer.datamodule.tokenizer

    def sample(self, pl_module) -> str:
        model = pl_module.model
        ids = self.tokenizer.encode(self.prompt) or [0]
        room = model.config.context_length - len(ids)
        prompt = torch.tensor([ids[-model.config.context_length + 1 :]], device=pl_module.device)
        # its own generator: sampling must not move the RNG that dropout draws from (exact resume)
        generator = torch.Generator(device=pl_module.device).manual_seed(self.seed)
        out = generate(
            model,
            prompt,
            min(self.max_new_tokens, max(1, room)),
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            generator=generator,
        )
        return self.tokenizer.decode(out[0].tolist())

    def on_validation_end(self, trainer, pl_module):
        if trainer.sanity_checking or self.max_new_tokens <= 0:
            return
        self.last_sample = self.sample(pl_module)
        for logger in trainer.loggers:
            experiment = getattr(logger, "experiment", None)
            if hasattr(experiment, "add_text"):
                # two trailing spaces: TensorBoard renders text as Markdown
                experiment.add_text("sample", self.last_sample.replace("\n", "  \n"), trainer.global_step)

    def on_train_end(self, trainer, pl_module):
        if self.last_sample is None:
            self.last_sample = self.sample(pl_module)
