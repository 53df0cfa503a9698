"""Guards against changes that used to leave every test green: the warmup's first step, the cosine floor, a
scheduler that never steps, position=none, the MoE auxiliary loss, weight decay on norms and biases, and
checkpoints loaded with code execution. (evaluate.py's split=test is guarded in test_train_tools.py.)"""

from __future__ import annotations

import math
import os

import lightning as L
import pytest
import torch

from tinygpt.model import GPT, GPTConfig
from tinygpt.train.checkpoints import CheckpointError, read_checkpoint
from tinygpt.train.optim import OptimConfig
from tinygpt.train.run import train
from tinygpt.train.schedules import lr_multiplier


def lr_per_step(schedule: str, total: int, warmup: int = 4, min_lr_ratio: float = 0.1) -> list[float]:
    """The learning rate each optimizer step 1..total runs at, from the optimizer and scheduler as built."""
    optimizer, scheduler = OptimConfig(
        lr=1e-3, warmup_steps=warmup, schedule=schedule, min_lr_ratio=min_lr_ratio
    ).build(torch.nn.Linear(2, 2), total)
    rates = []
    for _ in range(total):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


def test_warmup_runs_step_1_at_one_over_warmup_of_the_peak():
    rates = lr_per_step("constant", total=6)
    assert rates == pytest.approx([0.25e-3, 0.5e-3, 0.75e-3, 1e-3, 1e-3, 1e-3], rel=1e-9)


def test_cosine_decays_to_the_configured_floor_not_to_zero():
    rates = lr_per_step("cosine", total=20, min_lr_ratio=0.1)
    assert rates[-1] == pytest.approx(1e-4, rel=1e-9)  # step 20: the floor, 10% of the peak
    # step 12, half way through the decay: the floor plus half the range
    assert rates[11] == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5))), rel=1e-9)
    assert min(rates[4:]) == pytest.approx(1e-4, rel=1e-9)


def test_training_steps_the_scheduler_every_optimizer_step(tiny_cfg, tmp_path):
    """train/lr as logged by a real run (warmup 2, cosine over 8 steps) follows the schedule step by step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    train(tiny_cfg("optim/schedule=cosine"), tmp_path)
    events = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0}).Reload()
    logged = {e.step: e.value for e in events.Scalars("train/lr")}
    expected = {
        step: 1e-3 * lr_multiplier(step - 1, schedule="cosine", warmup_steps=2, total_steps=8) for step in range(1, 9)
    }
    assert sorted(logged) == sorted(expected)
    assert [logged[s] for s in sorted(logged)] == pytest.approx([expected[s] for s in sorted(expected)], rel=1e-6)


def tiny_model(position: str) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=11, context_length=8, d_model=16, n_layers=1, n_heads=2, position=position))


def test_position_none_has_no_position_information_at_all():
    """Without positions, one layer of causal attention sees its prefix as a set: permuting the tokens before
    the last one leaves the last position's output unchanged. A learned table or RoPE would change it (checked
    too, so the test can tell them apart)."""
    a, b = torch.tensor([[1, 2, 3, 4, 5]]), torch.tensor([[3, 1, 4, 2, 5]])

    def last_logits(model, idx):
        with torch.no_grad():
            return model(idx).logits[0, -1]

    none = tiny_model("none")
    assert torch.allclose(last_logits(none, a), last_logits(none, b), atol=1e-5)
    assert not any("position" in name for name, _ in none.named_parameters())
    assert none.num_parameters() == tiny_model("learned").num_parameters() - 8 * 16
    for position in ("learned", "rope"):
        model = tiny_model(position)
        assert not torch.allclose(last_logits(model, a), last_logits(model, b), atol=1e-5), position


def test_the_moe_auxiliary_loss_is_part_of_the_loss_that_is_optimized(tiny_cfg, tmp_path):
    seen = []

    class Spy(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            metrics = trainer.callback_metrics
            seen.append((float(outputs["loss"]), float(metrics["train/loss"]), float(metrics["train/moe_aux_loss"])))

    from tinygpt.train import run

    original = run.build_callbacks
    try:
        run.build_callbacks = lambda *args: original(*args) + [Spy()]
        train(
            tiny_cfg(
                "model.mlp=moe",
                "model.n_experts=4",
                "model.top_k=1",
                "model.moe_aux_loss_weight=0.5",
                "trainer.max_steps=3",
            ),
            tmp_path,
        )
    finally:
        run.build_callbacks = original
    assert len(seen) == 3
    for optimized, cross_entropy, aux in seen:
        assert aux > 0.1  # weighted by 0.5, at least 0.5 per layer for a balanced router
        assert optimized == pytest.approx(cross_entropy + aux, rel=1e-6)


def test_weight_decay_shrinks_matrices_and_leaves_norms_and_biases_alone():
    torch.manual_seed(0)
    model = GPT(
        GPTConfig(
            vocab_size=11, context_length=8, d_model=16, n_layers=1, n_heads=2, norm="layernorm", bias=True, mlp="gelu"
        )
    )
    optimizer, _ = OptimConfig(lr=0.1, weight_decay=0.5, warmup_steps=0).build(model, 10)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # no gradient: only weight decay moves a parameter
    optimizer.step()
    vectors = 0
    for name, p in model.named_parameters():
        if p.dim() >= 2:
            assert torch.allclose(p, before[name] * (1 - 0.1 * 0.5)), name
        else:
            vectors += 1
            assert torch.equal(p, before[name]), f"{name} (a norm gain or bias) was decayed"
    assert vectors >= 4  # norm gains and biases were there to check


class Payload:
    """Unpickling this runs os.mkdir: what a malicious checkpoint would do."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return os.mkdir, (self.path,)


def test_a_checkpoint_that_runs_code_when_unpickled_is_refused_without_running_it(tiny_cfg, tmp_path):
    marker = tmp_path / "code-ran"
    bomb = tmp_path / "run" / "checkpoints" / "last.ckpt"
    bomb.parent.mkdir(parents=True)
    torch.save({"state_dict": {}, "global_step": 1, "payload": Payload(str(marker))}, bomb)
    # named as what it is, without torch's advice to load it with weights_only=False (which would run it)
    with pytest.raises(CheckpointError, match="is not a tinygpt checkpoint: torch's weights-only loader refused"):
        read_checkpoint(bomb)
    with pytest.raises(CheckpointError, match="is not a tinygpt checkpoint: torch's weights-only loader refused"):
        train(tiny_cfg(), tmp_path / "run")  # resume=auto finds it
    assert not marker.exists()
