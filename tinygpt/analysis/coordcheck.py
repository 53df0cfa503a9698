"""Yang et al.'s coordinate check: how large each layer kind's activations are after a few steps, across widths.

Why: μP's promise is that every activation's coordinates stay Θ(1) as the model widens, during training and not
only at init; a parametrization with a slip (a multiplier missing, a learning rate scaled on the wrong side)
still trains, and only shows as a root mean square that climbs or falls with width. So the check trains the same
model at several widths (same depth, same data, same learning rate) for a few steps under each parametrization,
and records, at init and after every step, the root mean square of the coordinates of five layer kinds: the
embedding output (with a learned or fixed position table), the attention and MLP outputs, the block output
(averaged over the blocks), and the logits. Under μP the lines of rms against width are flat; under the standard
parametrization they climb (Tensor Programs V, Figure 5; microsoft/mup's ``get_coord_data``).

Recorded on one fixed batch in eval mode (no dropout), so the only thing that differs between widths is the
model; trained on the run's own batch stream with the run's optimizer and schedule (``optim.*``,
tinygpt/train/optim.py), gradient clipping included.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

LAYERS = ("embedding", "attention", "mlp", "block", "logits")  # the layer kinds, in the CSV's and the plot's order
COLUMNS = ("parametrization", "width", "step", "layer", "rms")


def _rms(t: torch.Tensor) -> float:
    return float(t.detach().float().pow(2).mean().sqrt())


def record(model: torch.nn.Module, inputs: torch.Tensor) -> dict[str, float]:
    """Each layer kind's rms on ``inputs`` (eval mode, no gradient); attention, MLP and block averaged over the
    blocks."""
    seen: dict[str, list[float]] = defaultdict(list)
    # the embedding output is what the first block reads: token embeddings plus a position table, if any
    hooks = [model.blocks[0].register_forward_pre_hook(lambda m, args: seen["embedding"].append(_rms(args[0])))]
    for block in model.blocks:
        hooks.append(block.attention.register_forward_hook(lambda m, a, out: seen["attention"].append(_rms(out))))
        hooks.append(block.mlp.register_forward_hook(lambda m, a, out: seen["mlp"].append(_rms(out[0]))))
        hooks.append(block.register_forward_hook(lambda m, a, out: seen["block"].append(_rms(out[0]))))
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            logits = model(inputs).logits
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    seen["logits"].append(_rms(logits))
    return {layer: float(np.mean(seen[layer])) for layer in LAYERS}


def check(
    build: Callable[[str, int], tuple[torch.nn.Module, torch.optim.Optimizer, object]],
    batches: Callable[[], Sequence[tuple[torch.Tensor, torch.Tensor]]],
    widths: Sequence[int],
    parametrizations: Sequence[str],
    steps: int,
    grad_clip: float,
) -> list[dict]:
    """The check's rows (COLUMNS): for each parametrization and width, ``build(parametrization, width)`` gives
    (model, optimizer, schedule), ``batches()`` the same ``steps`` training batches for every model; rms recorded
    on the first batch's inputs at step 0 (init) and after each of ``steps`` updates."""
    rows = []
    for parametrization in parametrizations:
        for width in widths:
            model, optimizer, schedule = build(parametrization, width)
            stream = batches()
            probe = stream[0][0]
            for step in range(steps + 1):
                rows += [
                    {"parametrization": parametrization, "width": width, "step": step, "layer": k, "rms": v}
                    for k, v in record(model, probe).items()
                ]
                if step == steps:
                    break
                inputs, targets = stream[step]
                logits, aux = model(inputs)
                loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten()) + aux
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if grad_clip:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
                optimizer.step()
                schedule.step()
    return rows


def slopes(rows: Sequence[dict], step: int) -> dict[tuple[str, str], float]:
    """The least-squares slope of log2(rms) against log2(width) at ``step``, per (parametrization, layer): 0 when
    the layer's size does not depend on width; 1 when it doubles with each doubling of the width."""
    points: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for row in rows:
        if int(row["step"]) == step:
            points[(row["parametrization"], row["layer"])].append(
                (math.log2(float(row["width"])), math.log2(float(row["rms"])))
            )
    return {key: float(np.polyfit(*zip(*pts, strict=False), 1)[0]) for key, pts in points.items() if len(pts) > 1}


def write_csv(rows: Sequence[dict], path: Path) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "rms": f"{row['rms']:.6g}"})


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return [
            {**row, "width": int(row["width"]), "step": int(row["step"]), "rms": float(row["rms"])}
            for row in csv.DictReader(f)
        ]


def plot(rows: Sequence[dict], path: Path) -> None:
    """One panel per parametrization: rms against width on log axes, one line per (layer, step), each layer kind
    in its colour and later steps darker."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    parametrizations = list(dict.fromkeys(row["parametrization"] for row in rows))
    steps = sorted({int(row["step"]) for row in rows})
    fig, axes = plt.subplots(1, len(parametrizations), figsize=(5.5 * len(parametrizations), 4.2), sharey=True)
    axes = np.atleast_1d(axes)
    colours = dict(zip(LAYERS, ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"), strict=False))
    for ax, parametrization in zip(axes, parametrizations, strict=False):
        for layer in LAYERS:
            for i, step in enumerate(steps):
                pts = sorted(
                    (row["width"], row["rms"])
                    for row in rows
                    if row["parametrization"] == parametrization and row["layer"] == layer and row["step"] == step
                )
                if not pts:
                    continue
                alpha = 0.25 + 0.75 * (i + 1) / len(steps)
                label = layer if step == steps[-1] else None
                ax.plot(*zip(*pts, strict=False), marker="o", ms=3, color=colours[layer], alpha=alpha, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("width (d_model)")
        ax.set_title(f"{parametrization}: steps 0-{steps[-1]} (darker: later)")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("rms of the coordinates")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
