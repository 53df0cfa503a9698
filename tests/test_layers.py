"""The packages stack one way: no module imports a package above its own layer, no modules import each other
(not even from inside a function, where a cycle hides from Python but not from the design), and Hydra's private
API is used nowhere.

Every module of tinygpt/ is parsed (ast, so imports inside functions and under TYPE_CHECKING count too, and
relative imports are resolved) and each import of another tinygpt package is checked against LAYERS. Packages
in one layer are siblings and may not import each other either. A package that is in no layer fails the test,
so a new package must be placed. scripts/ sit on top and may import anything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# lowest first; see docs/architecture.md for what lives where and why
LAYERS: list[set[str]] = [
    {"common"},  # atomic writes, eval-mode scopes: imports nothing of tinygpt
    {"model", "data"},  # the networks; corpora, tokenizers, splits, windows: unaware of each other
    {"metrics"},  # bits per byte, per-token costs (scores data's windows)
    {"launch"},  # device placement, leases, multi-device guards, launcher resolvers
    {"train"},  # the LightningModule, callbacks, run record and folder, evaluate
    {"baselines", "export", "report"},  # read trained runs: baseline scores, HF export/import, sweep report
    {"analysis"},  # explains scores, using baselines' texts and summaries
    {"cli"},  # the command-line programs
    {"bench", "api"},  # the benchmark programs (on the programs' parsing); the Python API: the programs' calls
]
TOP = "tinygpt"  # tinygpt/__init__.py imports nothing


def rank_of(package: str) -> int:
    for rank, layer in enumerate(LAYERS):
        if package in layer:
            return rank
    raise KeyError(package)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the tree, relative ones resolved against ``module``;
    ``from tinygpt import x`` counts as importing ``tinygpt.x``."""
    found = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name == TOP:
                found += [(node.lineno, f"{TOP}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, name))
    return found


def upward_imports(root: Path) -> list[str]:
    """Every import in ``root``/tinygpt that runs up the stack or sideways between siblings, as
    'file:line: package imports module (layer a > b)'; packages in no layer are reported too."""
    problems = []
    for path in sorted((root / TOP).rglob("*.py")):
        module = module_name(path, root)
        parts = module.split(".")
        own = parts[1] if len(parts) > 1 else None
        if own is not None and path.parent == root / TOP:
            problems.append(f"{path.relative_to(root)}: a module directly in tinygpt/; put it in a layer's package")
            continue
        try:
            own_rank = rank_of(own) if own else -1
        except KeyError:
            problems.append(f"{path.relative_to(root)}: package tinygpt.{own} is in no layer of tests/test_layers.py")
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for line, name in imported_modules(tree, module, path.name == "__init__.py"):
            target = name.split(".")
            if target[0] != TOP or len(target) < 2:
                continue
            other = target[1]
            if other == own:
                continue
            where = f"{path.relative_to(root)}:{line}"
            if own is None:
                problems.append(f"{where}: tinygpt/__init__.py imports {name}; it must import nothing")
                continue
            try:
                other_rank = rank_of(other)
            except KeyError:
                problems.append(f"{where}: imports {name}, a package in no layer")
                continue
            if other_rank >= own_rank:
                kind = "a sibling of its layer" if other_rank == own_rank else f"layer {other_rank} > {own_rank}"
                problems.append(f"{where}: tinygpt.{own} imports {name} ({kind})")
    return problems


def module_imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """``imported_modules`` with ``from a.b import c`` also counted as importing ``a.b.c`` (a submodule, when it is
    one). Imports under ``if TYPE_CHECKING:`` count: a type one file takes from another is a tie of the design too,
    whether or not Python runs it."""
    kept = ast.Module(body=[], type_ignores=[])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            kept.body = [node]
            found += imported_modules(kept, module, is_package)
            if isinstance(node, ast.ImportFrom):
                base = imported_modules(kept, module, is_package)[0][1]
                found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return found


def import_cycles(root: Path) -> list[list[str]]:
    """Groups of tinygpt modules that import each other, directly or round a loop, counting imports inside
    functions and under TYPE_CHECKING (the usual ways to hide a cycle from Python, not from the design); each
    group sorted."""
    modules = {module_name(p, root): p for p in sorted((root / TOP).rglob("*.py"))}
    graph = {
        name: {
            other
            for _, other in module_imports(ast.parse(path.read_text()), name, path.name == "__init__.py")
            if other in modules and other != name
        }
        for name, path in modules.items()
    }
    order, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        order[node] = low[node] = len(order)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in order:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], order[other])
        if low[node] == order[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                cycles.append(sorted(group))

    for name in modules:
        if name not in order:
            visit(name)
    return sorted(cycles)


def test_no_modules_import_each_other_even_inside_functions():
    assert import_cycles(REPO) == []


def test_cycles_hidden_inside_a_function_or_under_type_checking_are_found(tmp_path):
    root = plant(
        tmp_path,
        {
            "__init__.py": "",
            "train/__init__.py": "",
            "train/a.py": "from tinygpt.train.b import thing\n",
            "train/b.py": "def thing():\n    from tinygpt.train.a import other\n",
            "train/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tinygpt.train.d import T\n",
            "train/d.py": "from tinygpt.train import c\n",
        },
    )
    assert import_cycles(root) == [["tinygpt.train.a", "tinygpt.train.b"], ["tinygpt.train.c", "tinygpt.train.d"]]


def test_every_package_is_placed_in_a_layer():
    packages = {p.parent.name for p in (REPO / TOP).glob("*/__init__.py")}
    placed = set().union(*LAYERS)
    assert packages == placed, f"unplaced: {sorted(packages - placed)}, gone: {sorted(placed - packages)}"


def test_no_import_runs_up_the_stack():
    assert upward_imports(REPO) == []


def plant(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / TOP / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from tinygpt.train.run import train\n", "tinygpt/data/x.py:1: tinygpt.data imports tinygpt.train.run"),
        ("def f():\n    import tinygpt.report.jobs\n", "tinygpt/data/x.py:2: tinygpt.data imports tinygpt.report.jobs"),
        ("from tinygpt import cli\n", "tinygpt/data/x.py:1: tinygpt.data imports tinygpt.cli"),
        ("from ..launch import placement\n", "tinygpt/data/x.py:1: tinygpt.data imports tinygpt.launch"),
        ("from tinygpt.model import GPT\n", "tinygpt/data/x.py:1: tinygpt.data imports tinygpt.model (a sibling"),
    ],
)
def test_a_planted_upward_import_is_named(tmp_path, source, expected):
    root = plant(tmp_path, {"__init__.py": "", "data/__init__.py": "", "data/x.py": source})
    (problem,) = upward_imports(root)
    assert problem.startswith(expected), problem


def test_downward_and_own_package_imports_pass(tmp_path):
    root = plant(
        tmp_path,
        {
            "__init__.py": "",
            "train/__init__.py": "",
            "train/x.py": "from tinygpt.common.files import atomic_write\nfrom . import y\nfrom .y import z\n"
            "import tinygpt.launch.placement\nimport torch\n",
        },
    )
    assert upward_imports(root) == []


def test_an_unplaced_package_is_reported(tmp_path):
    root = plant(tmp_path, {"__init__.py": "", "newpkg/__init__.py": "import os\n"})
    assert upward_imports(root) == [
        "tinygpt/newpkg/__init__.py: package tinygpt.newpkg is in no layer of tests/test_layers.py"
    ]


def test_hydra_private_api_is_used_nowhere():
    offenders = [
        f"{path.relative_to(REPO)}:{n}"
        for folder in ("tinygpt", "scripts")
        for path in sorted((REPO / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "hydra._internal" in line
    ]
    assert offenders == []


def test_a_checkout_composes_from_conf_at_its_root_and_pyproject_ships_every_package():
    """conf/ sits at the checkout's root (the design card's layout) and is the config location of a checkout; the
    wheel gets it through pyproject.toml's package-dir mapping, whose package list must name every package of
    tinygpt/ (a package left out would be missing from the wheel, silently)."""
    import tomllib

    from tinygpt.cli import CONF

    assert CONF == str(REPO / "conf") and not (REPO / TOP / "conf").exists()
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"tinygpt.conf": "conf"}
    packages = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / TOP).rglob("__init__.py")}
    # hydra_plugins: a namespace package, listed so that an editable install adds it to Hydra's plugin search
    assert set(setuptools["packages"]) == packages | {"tinygpt.conf", "hydra_plugins", "hydra_plugins.tinygpt_search"}
