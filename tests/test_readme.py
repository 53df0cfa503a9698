"""The README's commands run as written: each command of its code blocks and of its task table is checked.

- `make <target>`: the Makefile has the target.
- `tinygpt-<program> ...`: the program is a console entry point of pyproject.toml, and its arguments are what
  the program accepts: the Hydra programs compose their config from exactly these overrides (a sweep's first
  job; `--config-dir` searched as Hydra searches it) and `tinygpt-train`'s is checked by the run's typed
  schemas; `tinygpt-report`'s are parsed by its argument parser.
- The Python block runs (it trains a smoke run in a temporary folder).
Training the README's sweeps for real is what the rest of the suite and docs/results.md do.
"""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path

import pytest
from conftest import REPO, requires_data
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser

from tinygpt.cli import CONF
from tinygpt.cli.config import compose_run_config
from tinygpt.cli.entry import pass_paths
from tinygpt.cli.register import build_parser as register_parser
from tinygpt.cli.register import parse_settings
from tinygpt.cli.report import build_parser
from tinygpt.report.jobs import expand_sweep
from tinygpt.train.schema import parse_run_config

README = (REPO / "README.md").read_text()
# each Hydra program's config: (search path, primary config), as its @hydra.main names them
PROGRAMS = {
    "tinygpt-train": (CONF, "train"),
    "tinygpt-evaluate": (CONF, "tools/evaluate"),
    "tinygpt-generate": (CONF, "tools/generate"),
    "tinygpt-export": (CONF, "tools/export"),
    "tinygpt-params": (CONF, "params"),
    "tinygpt-import-hf": (CONF, "tools/import_hf"),
    "tinygpt-prepare": (CONF, "tools/prepare"),
    "tinygpt-lm-eval": (CONF, "tools/lm_eval"),
}


def commands() -> list[str]:
    """Every command line of the README's bash blocks and of its tables' code spans, comments dropped."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", README, re.S):
        found += [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]
    for row in (line for line in README.splitlines() if line.startswith("| ")):
        found += [span for span in re.findall(r"`([^`]+)`", row) if span.startswith(("tinygpt-", "make "))]
    return found


def test_the_readme_has_its_commands():
    names = {shlex.split(c)[0] for c in commands()}
    assert {"make", "tinygpt-train", "tinygpt-report", "tinygpt-evaluate", "tinygpt-export"} <= names


@pytest.mark.parametrize("command", [c for c in commands() if c.startswith("make ")])
def test_make_targets_exist(command):
    makefile = (REPO / "Makefile").read_text()
    for target in shlex.split(command)[1:]:
        if "=" not in target:
            assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"Makefile has no target {target}"


def test_pip_install_is_the_wheel_test():
    """`pip install .` is what tests/test_install.py does with a built wheel."""
    assert "pip install ." in commands() and (REPO / "tests" / "test_install.py").is_file()


# [project.scripts]' names (tomllib is Python 3.11+, and tinygpt runs on 3.10)
SCRIPTS = set(re.findall(r"^(tinygpt-[a-z-]+) = ", (REPO / "pyproject.toml").read_text(), re.M))


@pytest.mark.parametrize("command", [c for c in commands() if c.startswith("tinygpt-")])
def test_each_program_accepts_its_arguments(command):
    program, *arguments = shlex.split(command)
    assert program in SCRIPTS, f"{program} is not a console command of pyproject.toml"
    if program == "tinygpt-report":
        build_parser().parse_args(arguments)
        return
    if program == "tinygpt-register":
        parse_settings(register_parser().parse_args(arguments).settings)
        return
    if program == "tinygpt-coordcheck":  # its own keys, then training overrides, composed as tinygpt-train's
        from tinygpt.cli.coordcheck import parse

        own, overrides = parse(arguments)
        compose_run_config([*overrides, f"model.d_model={own['widths'][-1]}"])
        return
    search_path, config_name = PROGRAMS[program]
    main = importlib.import_module(f"tinygpt.cli.{program.removeprefix('tinygpt-').replace('-', '_')}").main
    arguments = pass_paths(arguments, *main.paths)  # a bare run folder or checkpoint, as the program reads it
    overrides, extra_dirs = [], []
    while arguments:
        argument = arguments.pop(0)
        if argument == "-m":
            continue
        if argument == "--config-dir":
            extra_dirs.append(str(REPO / arguments.pop(0)))
            continue
        overrides.append(argument)
    first_job = list(expand_sweep(OverridesParser.create().parse_overrides(overrides))[0]) if overrides else []
    if extra_dirs:
        first_job.append(f"hydra.searchpath=[{','.join('file://' + d for d in extra_dirs)}]")
    with initialize_config_dir(search_path, version_base="1.3" if program != "tinygpt-params" else None):
        cfg = compose(config_name, overrides=first_job)
    if program == "tinygpt-train":
        parse_run_config(cfg)


@requires_data
def test_the_python_block_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    [block] = re.findall(r"```python\n(.*?)```", README, re.S)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["record"]["status"] == "finished" and (tmp_path / "runs" / "demo" / "run.json").is_file()


def test_the_configuration_page_lists_every_choice_of_every_group():
    """docs/configuration.md is the page the README sends users to for "every group and key": each group in its
    table lists every config file the package has in that group."""
    page = (REPO / "docs" / "configuration.md").read_text()
    rows = [line.split(" | ") for line in page.splitlines() if line.startswith("| `")]
    listed = {row[0].strip("| `"): set(re.findall(r"`([^`=]+)`", row[1])) for row in rows}
    assert "model/position" in listed and "trainer" in listed
    for group, choices in listed.items():
        files = {path.stem for path in (Path(CONF) / group).glob("*.yaml")}
        assert files, f"docs/configuration.md lists {group}, which conf/ does not have"
        assert files <= choices, f"docs/configuration.md's {group} row lacks {sorted(files - choices)}"


def test_what_the_programs_print_names_console_commands_not_a_checkouts_scripts():
    """A wheel user has tinygpt-* commands, not scripts/*.py or the Makefile: messages, report pages and model cards
    name the commands (docstrings and comments may name either)."""
    import ast

    offenders = []
    for path in (REPO / "tinygpt").rglob("*.py"):
        tree = ast.parse(path.read_text())
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                if re.search(r"scripts/(?!bench_|data_stats)[a-z_]+\.py|make tensorboard", node.value):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value[:60]!r}")
    assert offenders == []
