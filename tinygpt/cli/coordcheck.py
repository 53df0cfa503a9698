"""The coordinate check of μP against the standard parametrization: tinygpt-coordcheck [keys] [training overrides]

    tinygpt-coordcheck                                        # widths 64-512, base 64, 10 steps, lr 1e-2
    tinygpt-coordcheck widths=[128,256,512,1024] base=128 steps=5 lr=3e-3 model/mlp=gelu
    tinygpt-coordcheck out=coordcheck/ parametrizations=[mup]

Its own keys: ``widths`` (d_model values, same depth and heads), ``base`` (model.mup_base_width; default: the
smallest width), ``steps`` (training steps; rms is recorded at init and after each), ``parametrizations``
(default [sp,mup]), ``out`` (the folder for coordcheck.csv and coordcheck.png; default outputs/coordcheck).
Every other argument is an override of the training config (``tinygpt-train``'s: model, data, optim, seed),
checked before anything is written. Unless given, ``optim.warmup_steps=0`` and ``model.dropout=0``: a check of
ten steps measures the updates themselves, not a warm-up's first percent of them or dropout's noise.
What it shows and how to read it: docs/mup.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from tinygpt.analysis import coordcheck
from tinygpt.cli.entry import entry
from tinygpt.common.errors import ConfigError, require
from tinygpt.common.say import say

OWN_KEYS = ("widths", "base", "steps", "parametrizations", "out")
DEFAULTS = {"optim.warmup_steps": "0", "model.dropout": "0.0", "lr": "1e-2"}


def parse(argv: list[str]) -> tuple[dict, list[str]]:
    """The check's own keys (OWN_KEYS, read as YAML values) and the training overrides, in order."""
    own = {"widths": [64, 128, 256, 512], "base": None, "steps": 10, "parametrizations": ["sp", "mup"]}
    own["out"] = "outputs/coordcheck"
    overrides = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key in OWN_KEYS:
            own[key] = yaml.safe_load(value) if key != "out" else value
        else:
            overrides.append(arg)
    widths = own["widths"]
    require(
        isinstance(widths, list | tuple) and len(widths) >= 2 and all(isinstance(w, int) and w > 0 for w in widths),
        "widths",
        widths,
        "a list of at least two positive integers (d_model values), e.g. widths=[64,128,256,512]",
    )
    own["widths"] = sorted(widths)
    own["base"] = own["widths"][0] if own["base"] is None else own["base"]
    require(isinstance(own["base"], int) and own["base"] > 0, "base", own["base"], "a positive integer (a d_model)")
    require(isinstance(own["steps"], int) and own["steps"] >= 1, "steps", own["steps"], "a positive integer")
    parametrizations = own["parametrizations"]
    require(
        isinstance(parametrizations, list | tuple) and set(parametrizations) <= {"sp", "mup"} and parametrizations,
        "parametrizations",
        parametrizations,
        "a list of sp and/or mup",
    )
    given = {arg.partition("=")[0].lstrip("+") for arg in overrides}
    overrides = [f"{k}={v}" for k, v in DEFAULTS.items() if k not in given] + overrides
    return own, overrides


def run(own: dict, overrides: list[str]) -> list[dict]:
    """Compose and check every model first (one line on a bad setting, nothing written), then train them."""
    import lightning as L

    from tinygpt.cli.config import compose_run_config
    from tinygpt.data import build_datamodule
    from tinygpt.model import GPTConfig
    from tinygpt.train import device_settings
    from tinygpt.train.module import build_module
    from tinygpt.train.preflight import check_run_config
    from tinygpt.train.schema import parse_run_config

    runs = {}
    for parametrization in own["parametrizations"]:
        for width in own["widths"]:
            cfg = compose_run_config(
                [*overrides, f"model.d_model={width}", f"model.parametrization={parametrization}"]
                + ([f"model.mup_base_width={own['base']}"] if parametrization == "mup" else [])
            )
            check_run_config(cfg)  # every value checked as tinygpt-train checks it
            run, device = device_settings.prepare(parse_run_config(cfg))
            if not isinstance(run.model, GPTConfig):
                raise ConfigError("model: the coordinate check needs a GPT (model.family=gpt), not an LSTM")
            runs[(parametrization, width)] = (run, device)
    first, _ = next(iter(runs.values()))
    datamodule = build_datamodule(first.data, first.model.context_length, first.seed)
    datamodule.setup("fit")
    loader = iter(datamodule.train_dataloader())
    stream = [next(loader) for _ in range(own["steps"])]

    def build(parametrization: str, width: int):
        run, device = runs[(parametrization, width)]
        module = build_module(run, datamodule.tokenizer, device.speed)  # seeded by run.seed: the same init draws
        optimizers = module.configure_optimizers()
        return module.model, optimizers["optimizer"], optimizers["lr_scheduler"]["scheduler"]

    L.seed_everything(first.seed, workers=True, verbose=False)
    return coordcheck.check(
        build, lambda: stream, own["widths"], own["parametrizations"], own["steps"], first.optim.grad_clip
    )


@entry()
def main(argv: list[str] | None = None) -> None:
    own, overrides = parse(sys.argv[1:] if argv is None else argv)
    if "--help" in overrides or "-h" in overrides:
        print(__doc__)
        return
    rows = run(own, overrides)
    out = Path(own["out"])
    out.mkdir(parents=True, exist_ok=True)
    coordcheck.write_csv(rows, out / "coordcheck.csv")
    coordcheck.plot(rows, out / "coordcheck.png")
    last = own["steps"]
    for (parametrization, layer), slope in sorted(coordcheck.slopes(rows, last).items()):
        say(f"{parametrization:4s} {layer:10s} slope of log2 rms against log2 width at step {last}: {slope:+.3f}")
    say(f"wrote {out / 'coordcheck.csv'} and {out / 'coordcheck.png'}")


if __name__ == "__main__":
    main()
