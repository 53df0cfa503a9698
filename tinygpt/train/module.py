"""The LightningModule: one GPT, its loss, its optimizer and its dev score in bits per byte."""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from typing import TYPE_CHECKING

import lightning as L
import torch
import torch.nn.functional as F

from tinygpt.common.errors import ConfigError
from tinygpt.common.typed import typed
from tinygpt.metrics import LN2, BitsPerByte
from tinygpt.model import GPTConfig, LSTMConfig, config_from
from tinygpt.model.kernels import linear_cross_entropy
from tinygpt.model.speed import SpeedConfig, optimizer_flags
from tinygpt.train.device_settings import apply_malloc
from tinygpt.train.optim import OptimConfig

if TYPE_CHECKING:
    from tinygpt.data import Tokenizer
    from tinygpt.train.schema import RunConfig


def build_module(run: RunConfig, tokenizer: Tokenizer, speed: SpeedConfig) -> GPTModule:
    """The run's LightningModule, its vocabulary taken from the tokenizer, its speed switches as resolved for the
    device (tinygpt/train/device_settings.py); the model's initialisation depends on the seed alone, not on data
    set-up. What train(), the Python API and the bench programs build."""
    config = model_config(run.model, tokenizer.vocab_size)
    L.seed_everything(run.seed, workers=True)
    return GPTModule(
        config,
        run.optim,
        run.trainer["max_steps"],
        tokenizer.to_json(),
        speed=speed,
        custom_imports=list(run.custom_imports),
    )


def model_config(config: GPTConfig | LSTMConfig, vocab_size: int) -> GPTConfig | LSTMConfig:
    """``config`` with the vocabulary filled from the tokenizer (``vocab_size=0``); fails before training."""
    if config.vocab_size == 0:
        return replace(config, vocab_size=vocab_size)
    if config.vocab_size < vocab_size:
        raise ConfigError(
            f"model.vocab_size={config.vocab_size} is smaller than the tokenizer's "
            f"{vocab_size}; set model.vocab_size=0 to take the tokenizer's"
        )
    return config


class NonFiniteLossError(FloatingPointError):
    """Raised when the training loss is NaN or infinite; the last good checkpoint is kept."""


class GPTModule(L.LightningModule):
    """Wraps :class:`GPT` (or the LSTM: the model config names its family, tinygpt/model/families.py).

    Takes the typed configs (GPTConfig or LSTMConfig, OptimConfig, SpeedConfig, as the run parsed them), or the
    plain dicts of their fields: a checkpoint's hyperparameters are those dicts (``asdict``), so that it loads with
    ``weights_only=True``, and Lightning's ``load_from_checkpoint`` reads them back into the same classes here.
    speed: the ``speed.*`` switches (tinygpt/model/speed.py); None takes their defaults.
    """

    def __init__(
        self,
        model: GPTConfig | LSTMConfig | dict,
        optim: OptimConfig | dict,
        max_steps: int,
        tokenizer_json: str | None = None,
        speed: SpeedConfig | dict | None = None,
        custom_imports: list[str] | None = None,  # in the checkpoint, so whoever loads it imports them first
    ):
        super().__init__()
        self.model_config = config_from(model)
        self.optim_config = optim if isinstance(optim, OptimConfig) else typed(OptimConfig, optim, "optim")
        self.speed_config = speed if isinstance(speed, SpeedConfig) else typed(SpeedConfig, speed or {}, "speed")
        # logger=False: the run logs its own hparams (the switches, not a tokenizer's JSON) with a metric
        self.save_hyperparameters(
            {
                "model": asdict(self.model_config),
                "optim": asdict(self.optim_config),
                "max_steps": max_steps,
                "speed": asdict(self.speed_config),
                "custom_imports": custom_imports,
            },
            logger=False,
        )
        self.tokenizer_json = tokenizer_json
        # how the modules compute is the speed switches' share that lives in the model, given when it is built
        self.model = self.model_config.build(self.speed_config)
        apply_malloc(self.speed_config.malloc)  # the process's malloc thresholds (tinygpt/train/device_settings.py)
        self.dev_score = BitsPerByte()
        self.best_dev_bpb = math.inf
        self.best_dev_step = -1

    def forward(self, idx: torch.Tensor):
        return self.model(idx)

    def compute_loss(self, inputs: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The training loss (mean nats per token) and the weighted MoE loss, as the speed switches compute
        them; scripts/bench_train.py's plain loop calls this too, so both loops time the same work."""
        hidden, aux_loss = self.model.train_features(inputs)  # compiled under speed.compile (the model's choice)
        weight, bias = self.model.head_weight, self.model.head_bias
        if self.speed_config.loss == "chunked":
            loss = linear_cross_entropy(hidden, weight, targets, self.speed_config.loss_chunk, bias=bias)
        else:
            logits = F.linear(hidden, weight, bias)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return loss, aux_loss

    def training_step(self, batch, batch_idx):
        inputs, targets = batch
        loss, aux_loss = self.compute_loss(inputs, targets)
        if not torch.isfinite(loss):
            raise NonFiniteLossError(
                f"training loss is {loss.item()} at step {self.global_step + 1}; stopping. "
                "The last good checkpoint is kept (checkpoints/last.ckpt)."
            )
        # sync_dist: under DDP, the loss of the whole global batch (the mean over ranks), as on one device;
        # on one device it would only add a reduction per step
        sync = self.trainer.world_size > 1
        self.log("train/loss", loss, prog_bar=True, sync_dist=sync)
        self.log("train/loss_bits", loss / LN2, sync_dist=sync)
        if self.model.has_aux_loss:
            self.log("train/moe_aux_loss", aux_loss)
        self.log("train/lr", self.lr_schedulers().get_last_lr()[0])
        return loss + aux_loss

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        # Clip by the global norm (optim.grad_clip) and log the norm the clip measured, before clipping, rather
        # than computing it a second time. trainer.gradient_clip_algorithm=value clips as Lightning does.
        # Without clipping (optim.grad_clip=0, as 000's recipe) the norm is only measured: clip_grad_norm_ with an
        # infinite bound would still multiply every gradient by 1.0, a pass over all of them every step
        # (docs/benchmarks/README.md).
        by_norm = gradient_clip_algorithm in (None, "norm")
        grads = [p.grad for p in self.parameters() if p.grad is not None]
        norm = torch.nn.utils.get_total_norm(grads)
        if by_norm and gradient_clip_val:
            torch.nn.utils.clip_grads_with_norm_(self.parameters(), gradient_clip_val, norm)
        self.log("train/grad_norm", norm)
        if not by_norm:
            self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def validation_step(self, batch, batch_idx):
        # The head runs on the scored positions only (about half of each sliding window; the rest is context),
        # which halves its cost at a 50,257-token vocabulary; each scored row's logits are the same numbers.
        # Lightning runs this under inference mode, and under autocast when training uses it.
        hidden, _ = self.model.features(batch["input"])
        scored = batch["scored"]
        logits = F.linear(hidden[scored], self.model.head_weight, self.model.head_bias)
        self.dev_score.update(
            logits,
            batch["target"][scored],
            torch.ones_like(scored[scored]),
            batch["target_bytes"][scored],
            batch["target_chars"][scored],
        )

    def on_validation_epoch_end(self):
        score = self.dev_score.compute()
        self.dev_score.reset()
        bpb = float(score["bits_per_byte"])
        if bpb < self.best_dev_bpb:
            self.best_dev_bpb, self.best_dev_step = bpb, self.global_step
        self.last_dev_score = {k: float(v) for k, v in score.items() if torch.as_tensor(v).numel() == 1}
        metrics = {
            "dev/bpb": bpb,
            "dev/loss": float(score["loss"]),
            "dev/bits_per_token": float(score["bits_per_token"]),
            "dev/bits_per_char": float(score["bits_per_char"]),
            "dev/best_bpb": self.best_dev_bpb,
            "hp/best_dev_bpb": self.best_dev_bpb,
        }
        # for the progress bar, callbacks and checkpoint monitors
        self.log_dict({k: v for k, v in metrics.items() if k != "dev/bpb"}, logger=False)
        self.log("dev/bpb", bpb, prog_bar=True, logger=False)
        # to the loggers at the optimizer step count (50, 100, ... as in 000's figure); self.log would file
        # them one step earlier, at Lightning's 0-based batch index
        if not self.trainer.sanity_checking:
            for logger in self.loggers:
                logger.log_metrics(metrics, step=self.global_step)

    def configure_optimizers(self):
        optimizer, schedule = self.optim_config.build(
            self.model, self.hparams.max_steps, optimizer_flags(self.speed_config)
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    # Exact resume: Lightning restores weights, optimizer, scheduler and loop counters; the batch stream is a
    # function of (seed, step); what is left is the RNG that dropout draws from, and the best score so far.
    def on_save_checkpoint(self, checkpoint):
        checkpoint["rng_state"] = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available():
            checkpoint["rng_state"]["cuda"] = torch.cuda.get_rng_state_all()
        checkpoint["best_dev"] = {"bpb": self.best_dev_bpb, "step": self.best_dev_step}
        if self.tokenizer_json is not None:
            checkpoint["tokenizer"] = self.tokenizer_json  # a checkpoint is self-contained

    def on_load_checkpoint(self, checkpoint):
        rng = checkpoint.get("rng_state")
        if rng is not None:
            torch.set_rng_state(rng["torch"])
            if "cuda" in rng and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(rng["cuda"])
        best = checkpoint.get("best_dev")
        if best is not None:
            self.best_dev_bpb, self.best_dev_step = best["bpb"], best["step"]
