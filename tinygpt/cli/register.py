"""Register a search's winner as an experiment, pre-registered to be scored once:  tinygpt-register <search> name=<r>

    tinygpt-register outputs/sweeps/peps_search name=peps_tuned --config-dir conf   # into a config folder of yours
    tinygpt-register outputs/sweeps/peps_search name=peps_tuned --package           # into tinygpt's conf/experiment/
    tinygpt-train --config-dir conf -m experiment=peps_tuned seed=0,1,2             # train the recipe's seeds
    tinygpt-evaluate sweep_dir=outputs/sweeps/peps_tuned split=test                 # score each once

Writes ``experiment/<recipe>.yaml``: the winning trial (the study's best, or ``trial=N``) as an experiment, that
is its experiment, the config groups it chose and every value in which its resolved config differs from them (the
sampled values, and the search's own fixed settings such as the budget per trial), plus ``score_once``: the steps
to score (default: the trial's last step), the seeds (default 0,1,2) and the recipe's name. Nothing is chosen
after this: the held-out split is read only by ``tinygpt-evaluate split=test`` on the recipe's runs, which the
score-once ledger lets score each pre-registered checkpoint once.

A config key given as ``key=value`` changes the trial before it is registered, e.g. ``trainer.max_steps=1000`` to
train a winner found with short trials at the full budget; the file says what was changed. That is a choice made
before any held-out score too, but the recipe's dev score is then no longer the trial's.

The file is checked before it is written: composed from a temporary folder, its resolved config must equal the
trial's (less the keys that only say where or how a run executes, and the seed), or nothing is written. An
existing experiment of that name is never overwritten.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from tinygpt.cli import CONF
from tinygpt.cli.config import compose_run_config
from tinygpt.cli.entry import entry, fail
from tinygpt.common.errors import ConfigError
from tinygpt.common.run_folder import config_record, read_record
from tinygpt.launch.search import trial_dir
from tinygpt.launch.search_config import override_key
from tinygpt.launch.study import load_finished_study
from tinygpt.train.score_once import flatten, recipe_switches

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]*$")
# groups an experiment does not choose: Hydra's own, and the search that found the recipe
SKIPPED_GROUPS = ("hydra/", "hparams_search", "experiment")
# keys that say which run this is or where it executes, not what it trains: never written into a recipe
EXECUTION = (
    "name",
    "seed",
    "trial",
    "score_once",
    "resume",
    "ckpt_path",
    "sweep",
    "progress",
    "callbacks",  # their settings are the run's own keys (conf/callbacks/), recorded there
    "data.root",
    "data.num_proc",
)


class Refused(ConfigError):
    pass


def parse_settings(items: Sequence[str]) -> dict:
    """name=, trial=, steps=, seeds=; any other ``key=value`` (a config key, e.g. trainer.max_steps=1000) is a
    change to the trial's config, stated in the file: ``settings["changes"]``."""
    allowed = {"name", "trial", "steps", "seeds"}
    settings: dict = {"changes": {}}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise Refused(f"{item}: expected key=value: {', '.join(sorted(allowed))}, or a config key to change")
        if key in allowed:
            settings[key] = value
        else:
            settings["changes"][key] = yaml.safe_load(value)
    if "name" not in settings or not NAME.match(settings["name"]):
        raise Refused(f"name={settings.get('name', '')}: the recipe needs a name of letters, digits, _ and -")
    for key in ("steps", "seeds"):
        if key in settings:
            try:
                settings[key] = [int(x) for x in settings[key].strip("[]").split(",") if x.strip()]
            except ValueError:
                raise Refused(f"{key}={settings[key]}: a comma-separated list of integers, e.g. {key}=0,1,2") from None
    if "trial" in settings:
        if not settings["trial"].isdigit():
            raise Refused(f"trial={settings['trial']}: a trial number")
        settings["trial"] = int(settings["trial"])
    return settings


def composed(overrides: Sequence[str], search_path: Sequence[Path], choices: bool = False) -> dict:
    """conf/train.yaml composed with ``overrides`` and these config folders on the search path, resolved (or,
    with ``choices``, the choice made in each config group)."""
    cfg = compose_run_config(overrides, search_path=search_path, return_hydra_config=choices)
    if choices:
        return dict(cfg.hydra.runtime.choices)
    return config_record(cfg)


def is_execution(key: str) -> bool:
    return any(key == p or key.startswith(p + ".") for p in EXECUTION)


def nest(values: Mapping[str, object]) -> dict:
    out: dict = {}
    for key, value in values.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def experiment_text(header: str, defaults: list, values: dict) -> str:
    body = {"defaults": [*defaults, "_self_"], **values}
    return "# @package _global_\n" + header + yaml.safe_dump(body, sort_keys=False, width=120, default_flow_style=None)


def write_experiment(folder: Path, name: str, text: str) -> Path:
    path = folder / "experiment" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def recipe(
    trial_config: dict,
    choices: dict,
    overridden: Sequence[str],
    search_path: Sequence[Path],
    name: str,
    header: str,
    registration: dict,
) -> str:
    """The experiment file's text: the trial's experiment and groups, its overridden values, then any value still
    different (the search's own settings) until the composed config is the trial's. ``overridden``: the keys its
    command line and sampler set, written first so values that follow them by interpolation (optim.lr follows lr)
    keep following."""
    experiment = choices.get("experiment")
    base = [f"experiment={experiment}"] if experiment else []
    base_choices = composed(base, search_path, choices=True)
    groups = {
        g: o
        for g, o in choices.items()
        if not g.startswith(SKIPPED_GROUPS) and o is not None and base_choices.get(g) != o
    }
    defaults = ([experiment] if experiment else []) + [{f"override /{g}": o} for g, o in groups.items()]
    want = {k: v for k, v in flatten(trial_config).items() if not is_execution(k)}
    values = {k: want[k] for k in overridden if k in want}
    with tempfile.TemporaryDirectory() as scratch:
        for _ in range(4):  # values set by interpolation follow the ones written: a second round is usually the last
            write_experiment(Path(scratch), name, experiment_text("", defaults, nest({**values, "name": name})))
            got = flatten(composed([f"experiment={name}"], [Path(scratch), *search_path]))
            differ = {k: v for k, v in want.items() if got.get(k, "<unset>") != v}
            if not differ:
                break
            values.update(differ)
        else:
            raise Refused(f"could not write the trial as an experiment: {sorted(differ)} still differ")
    return experiment_text(header, defaults, nest({"name": name, **values, "score_once": registration}))


def config_sources(sweep_dir: Path) -> list[Path]:
    """The config folders the search itself was given (--config-dir), so its experiment composes again."""
    saved = OmegaConf.load(sweep_dir / "multirun.yaml")
    return [Path(s.path) for s in saved.hydra.runtime.config_sources if s.provider == "command-line"]


def register(sweep_dir: Path, settings: dict, destination: Path, package: bool = False) -> Path:
    study = load_finished_study(sweep_dir)
    if "trial" in settings:
        chosen = [t for t in study.trials if t.number == settings["trial"]]
        if not chosen or chosen[0].value is None or chosen[0].state.name != "COMPLETE":
            raise Refused(f"trial={settings['trial']}: no finished trial of that number in {sweep_dir}")
        trial = chosen[0]
    else:
        try:
            trial = study.best_trial
        except ValueError:
            raise Refused(f"{sweep_dir}: no trial of this search has finished") from None
    name = settings["name"]
    search_path = config_sources(sweep_dir)
    taken = [p for p in (Path(CONF), *search_path, destination) if (p / "experiment" / f"{name}.yaml").exists()]
    if taken:
        raise Refused(f"name={name}: {taken[0] / 'experiment' / f'{name}.yaml'} exists; pick another name")
    folder = trial_dir(sweep_dir, trial.number)
    record = read_record(folder)
    if not record or "config" not in record:
        raise Refused(f"{folder}: no run.json with the trial's config")
    # the job's composed config, resolved: run.json's holds what the run resolved for its device (precision=auto)
    job_config = OmegaConf.load(folder / ".hydra" / "config.yaml")
    changes = settings.get("changes") or {}
    for key, value in changes.items():  # e.g. the winner at a longer budget: said in the file, checked like the rest
        if OmegaConf.select(job_config, key, default="<missing>") == "<missing>" or is_execution(key):
            raise Refused(f"{key}={value}: not a setting of the trial's config that a recipe can change")
        OmegaConf.update(job_config, key, value, merge=False)
    trial_config = config_record(job_config)
    choices = dict(OmegaConf.load(folder / ".hydra" / "hydra.yaml").hydra.runtime.choices)
    overrides = OmegaConf.load(folder / ".hydra" / "overrides.yaml")
    overridden = [override_key(line) for line in overrides] + list(changes)
    steps = settings.get("steps") or [int(trial_config["trainer"]["max_steps"])]
    seeds = settings.get("seeds") or [0, 1, 2]
    registration = {"steps": steps, "seeds": seeds, "recipe": name}
    searched = ", ".join(f"{k}={v}" for k, v in trial.params.items())
    header = (
        f"# Registered by tinygpt-register on {time.strftime('%Y-%m-%d')}, before any held-out score: trial "
        f"{trial.number} of the search in\n# {sweep_dir} (study {study.study_name}, {len(study.trials)} trials), "
        f"{trial.value:.4f} dev bits per byte (its best, chosen on dev).\n# Searched values: {searched}\n"
        + (f"# Changed from the trial: {', '.join(f'{k}={v}' for k, v in changes.items())}\n" if changes else "")
        + f"#   tinygpt-train{'' if package else f' --config-dir {destination}'} -m experiment={name} "
        f"seed={','.join(map(str, seeds))}\n"
        f"#   tinygpt-evaluate sweep_dir=outputs/sweeps/{name} split=test   # each seed once, at step(s) {steps}\n"
    )
    text = recipe(trial_config, choices, overridden, search_path, name, header, registration)
    # the check: the file composes, from where it will live, into the trial's recipe (the seed aside)
    with tempfile.TemporaryDirectory() as scratch:
        write_experiment(Path(scratch), name, text)
        got = composed([f"experiment={name}", f"seed={seeds[0]}"], [Path(scratch), *search_path])
    same = {**trial_config, "seed": seeds[0], "trial": None}
    if recipe_switches(got) != recipe_switches(same):
        differ = sorted(k for k, v in recipe_switches(got).items() if recipe_switches(same).get(k) != v)
        raise Refused(f"the written experiment would not train trial {trial.number}'s recipe: {differ} differ")
    return write_experiment(destination, name, text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("search_dir", type=Path, help="the search's folder (its hydra.sweep.dir)")
    parser.add_argument(
        "settings", nargs="+", help="name=<recipe> [trial=N] [steps=S,...] [seeds=0,1,2] [config.key=value ...]"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--config-dir", type=Path, default=None, help="your config folder (tinygpt-train --config-dir)")
    where.add_argument("--package", action="store_true", help="tinygpt's own conf/experiment/")
    return parser


@entry()
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = parse_settings(args.settings)
        if args.package:
            destination = Path(CONF)
        elif args.config_dir is not None:
            destination = args.config_dir
        else:
            sources = config_sources(args.search_dir) if (args.search_dir / "multirun.yaml").exists() else []
            if not sources:
                raise Refused("say where the experiment goes: --config-dir DIR (your config folder) or --package")
            destination = sources[0]
        path = register(args.search_dir, settings, destination, package=args.package)
    except (Refused, FileNotFoundError) as refused:
        raise fail(str(refused), "refused") from None
    print(path.read_text())
    print(f"[tinygpt] wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
