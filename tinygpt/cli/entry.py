"""Every program's entry: paths passed as the shell typed them, and failures in one line that say what to do.

Why one place: a newcomer meets the programs other than ``tinygpt-train`` through their errors, and each used to
end its own way (a traceback, Hydra's six lines, ``sys.exit`` with or without a prefix). Every console command is
its Hydra or argparse ``main`` wrapped by :func:`entry`, which

- turns a path the shell passed unquoted into the override Hydra can parse (:func:`pass_paths`): a bare run
  folder, checkpoint or sweep folder, or ``run_dir=`` / ``ckpt=`` / ... whose value holds ``=`` or ``,`` (a run
  folder's name does), so ``tinygpt-evaluate outputs/runs/default/model=tiny,seed=0`` works as typed;
- asks Hydra to hand its errors on (``HYDRA_FULL_ERROR``, Hydra's documented switch) instead of printing them,
  unless the user set it themselves to see every traceback;
- and turns a known error into one line on stderr with exit status 2 (:func:`line_for`): any ``ConfigError``
  (data, export, search and recipe refusals subclass it), an unreadable checkpoint, a busy run folder, a second
  held-out scoring, a misspelled key or group choice (with difflib's "did you mean"), a folder that cannot be
  written, an optional package not installed (with the extra to install). Anything else is a bug and keeps its
  traceback.

The same lines serve Python callers of a program's own functions through :func:`one_line`.
"""

from __future__ import annotations

import difflib
import functools
import importlib.metadata
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from hydra.errors import ConfigCompositionException, HydraException, MissingConfigException, OverrideParseException

from tinygpt.cli import CONF
from tinygpt.common.errors import ConfigError, PathError
from tinygpt.common.say import FULL_ERRORS_ENV, fail, full_errors
from tinygpt.launch.placement import in_multirun
from tinygpt.train.checkpoints import CheckpointError
from tinygpt.train.runlock import RunFolderBusy
from tinygpt.train.score_once import AlreadyScored

USER_ERRORS = (ConfigError, CheckpointError, RunFolderBusy, AlreadyScored)
# OSErrors that say where and why a file or folder could not be made or written: the user's path, not a bug
PATH_ERRORS = (PermissionError, NotADirectoryError, IsADirectoryError, FileExistsError, FileNotFoundError)
# Hydra's flags that take a value (a path after --config-dir is not a run folder)
HYDRA_VALUE_FLAGS = {"--config-dir", "-cd", "--config-path", "-cp", "--config-name", "-cn", "--experimental-rerun"}
# characters Hydra's override grammar reads as syntax in an unquoted value
HYDRA_SYNTAX = re.compile(r"[=,\s'\"\[\]{}()\\]")


@contextmanager
def one_line(verb: str = "error") -> Iterator[None]:
    """Turn a known error raised inside into its line and exit status 2; anything else passes unchanged."""
    try:
        yield
    except Exception as err:  # noqa: BLE001 - what is not known is re-raised below, traceback intact
        message = None if full_errors() else line_for(err)
        if message is None:
            raise
        raise fail(message, "refused" if isinstance(err, AlreadyScored) else verb) from None


def task(function: Callable) -> Callable:
    """Inside a Hydra program, under ``@hydra.main``: a single run's known error ends it in one line here, before
    Hydra would add its own ("Error executing job ..."); a multirun job's is left to the launcher, which records
    it and goes on with the next job (a SystemExit would stop the whole sweep)."""

    @functools.wraps(function)
    def run(cfg):
        if in_multirun():
            return function(cfg)
        with one_line():
            return function(cfg)

    return run


def line_for(err: BaseException) -> str | None:
    """The one line for a known error, or None for a bug."""
    if isinstance(err, USER_ERRORS):
        return str(err)
    if isinstance(err, MissingConfigException) and getattr(err, "options", None) is not None:
        return _unknown_choice(err)
    if isinstance(err, ConfigCompositionException) and hasattr(err.__cause__, "full_key"):
        return _unknown_key(err)
    if isinstance(err, OverrideParseException):
        return (
            f"an override could not be parsed ({str(err).splitlines()[0]}): write key=value, and quote a value "
            "holding '=', ',' or spaces, e.g. \"ckpt='outputs/runs/x/model=tiny,seed=0/checkpoints/last.ckpt'\""
        )
    if isinstance(err, HydraException):
        return "; ".join(line.strip() for line in str(err).splitlines() if line.strip())
    if isinstance(err, ModuleNotFoundError):
        return _missing_extra(err)
    if isinstance(err, FileNotFoundError) and err.filename:  # read or written: a file, or the folder it goes in
        return f"{err.filename}: {err.strerror} (a path given, or the folder it is written into, does not exist)"
    if isinstance(err, PATH_ERRORS) and err.filename:
        return (
            f"cannot write {err.filename}: {err.strerror}; choose a folder you can write (hydra.run.dir=..., out=...)"
        )
    return None


def _unknown_choice(err: MissingConfigException) -> str:
    group, _, choice = str(err.missing_cfg_file).rpartition("/")
    options = [o for o in err.options if not o.endswith("schema")]  # the typed schemas are not choices
    close = difflib.get_close_matches(choice, options, n=1)
    hint = f"; did you mean {group}={close[0]}?" if close else ""
    return f"{group}={choice}: no such choice{hint} ({group}: {', '.join(options)})"


def _unknown_key(err: ConfigCompositionException) -> str:
    cause = err.__cause__
    full_key, parent = str(cause.full_key), getattr(cause, "parent_node", None)
    section, _, key = full_key.rpartition(".")
    keys = [str(k) for k in parent.keys()] if hasattr(parent, "keys") else []
    close = difflib.get_close_matches(key, keys, n=1)
    hint = f"; did you mean {section + '.' if section else ''}{close[0]}?" if close else ""
    if section == "trainer":
        extra = "; another Lightning Trainer argument goes in as +trainer.NAME=VALUE"
    else:
        extra = f" ({section or 'the top level'} has: {', '.join(keys)})" if keys else ""
    return f"{full_key}: no such setting{hint}{extra}"


def _missing_extra(err: ModuleNotFoundError) -> str | None:
    """The extra that installs a missing module, from tinygpt's own metadata (``transformers; extra == "hf"``)."""
    missing = (err.name or "").split(".")[0]
    try:
        requirements = importlib.metadata.requires("tinygpt") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for requirement in requirements:
        name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", requirement)
        if extra and extra.group(1) != "dev" and name.replace("-", "_").lower() == missing.lower():
            return f"{program_name()} needs {name}: pip install 'tinygpt[{extra.group(1)}]'"
    return None


def program_name() -> str:
    """The running program's console name: tinygpt-export for both tinygpt-export and scripts/export.py."""
    name = Path(sys.argv[0]).stem.replace("_", "-")
    return name if name.startswith("tinygpt-") else f"tinygpt-{name}"


def pass_paths(argv: Sequence[str], path_keys: Sequence[str], bare: Callable[[Path], str | None] | None) -> list:
    """``argv`` with each path made an override Hydra parses: ``key=<value with = or ,>`` quoted, and a bare
    existing path (``outputs/runs/x/model=tiny,seed=0``) given to the key ``bare`` names for it."""
    out, after_flag = [], False
    for arg in argv:
        if after_flag or arg.startswith("-"):
            out.append(arg)
            after_flag = arg in HYDRA_VALUE_FLAGS
            continue
        key, equals, value = arg.partition("=")
        if equals and key in path_keys and value and value[0] not in "'\"" and HYDRA_SYNTAX.search(value):
            out.append(f"{key}={quote(value)}")
        elif bare is not None and is_bare_path(arg) and (named := bare(Path(arg))) is not None:
            if "=" in arg and not os.path.exists(arg):  # a mistyped run folder: Hydra would call it an override
                raise PathError(f"{arg}: no such folder or file{_closest(Path(arg))}")
            out.append(f"{named}={quote(arg)}")
        else:
            out.append(arg)
    return out


def is_bare_path(arg: str) -> bool:
    """A path given alone: one that exists, an argument no override could be (no ``=``, not ``+``/``~``), or one
    in an existing folder whose part before the ``=`` is no config group (``outputs/runs/x/model=tiny,seed=9``,
    mistyped, where ``model/position=rope`` is an override)."""
    if os.path.exists(arg) or ("=" not in arg and not arg.startswith(("+", "~"))):
        return True
    key = arg.partition("=")[0]
    return "/" in key and not (Path(CONF) / key).is_dir() and Path(arg).parent.is_dir()


def _closest(path: Path) -> str:
    """'; the closest is <sibling>' for the nearest name in the path's folder, or ''."""
    names = [p.name for p in path.parent.iterdir()] if path.parent.is_dir() else []
    close = difflib.get_close_matches(path.name, names, n=1)
    return f"; the closest is {path.parent / close[0]}" if close else ""


def quote(value: str) -> str:
    """A value in Hydra's single-quoted form (backslashes and quotes escaped)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def run_folder_or_checkpoint(path: Path) -> str | None:
    """evaluate's bare path: a checkpoint file is ``ckpt``, a sweep folder (``multirun.yaml``, no ``run.json``)
    ``sweep_dir``, any other folder ``run_dir`` (one not there yet: ``ckpt`` by its .ckpt suffix, else ``run_dir``,
    and the program says it is missing)."""
    if path.is_file() or (not path.exists() and path.suffix == ".ckpt"):
        return "ckpt"
    return "sweep_dir" if (path / "multirun.yaml").exists() and not (path / "run.json").exists() else "run_dir"


def checkpoint_file(path: Path) -> str | None:
    """generate's and export's bare path: a checkpoint file or a run folder (read as its checkpoints/last.ckpt by
    ``read_checkpoint``, which names any other path for what it is)."""
    return "ckpt"


def run_folder(path: Path) -> str | None:
    """analyze's bare path: a run folder."""
    return None if path.is_file() else "run_dir"


def entry(
    path_keys: Sequence[str] = (), bare: Callable[[Path], str | None] | None = None
) -> Callable[[Callable], Callable]:
    """Wrap a program's ``main`` (Hydra's or argparse's): paths passed as typed, errors in one line."""

    def wrap(main: Callable) -> Callable:
        @functools.wraps(main)
        def run(*args, **kwargs):
            try:
                sys.argv[1:] = pass_paths(sys.argv[1:], path_keys, bare)
            except PathError as missing:
                raise fail(str(missing)) from None
            full_errors = os.environ.get("HYDRA_FULL_ERROR") == "1"
            os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra hands its errors on instead of printing them
            if full_errors:  # what the user asked for, for the checks inside (preflights, @task) to honour too
                os.environ[FULL_ERRORS_ENV] = "1"
            try:
                return main(*args, **kwargs)
            except Exception as err:  # noqa: BLE001 - what is not known is re-raised below, traceback intact
                message = None if full_errors else line_for(err)
                if message is None:
                    raise
                raise fail(message, "refused" if isinstance(err, AlreadyScored) else "error") from None
            finally:
                os.environ.pop(FULL_ERRORS_ENV, None)
                if not full_errors:
                    os.environ.pop("HYDRA_FULL_ERROR", None)

        run.paths = (tuple(path_keys), bare)  # what pass_paths is given (tests/test_readme.py reads the programs' own)
        return run

    return wrap
