"""Import the user's own modules named in a config (``custom_imports``), so the parts they register exist.

A position encoding, MLP, norm, schedule or tokenizer of one's own is a class or function added to tinygpt's
registry for that switch (``POSITIONS``, ``MLPS``, ``NORMS``, ``SCHEDULES``, ...) by a module of one's own, plus
a YAML file in one's config folder (``--config-dir``). The module has to run before the run's config is checked
against the registries and in every process that builds the model (each sweep job, evaluate, generate), so the
run names it (``custom_imports=[my_parts]``, as torchtitan's ``--experimental.custom_import``) and its checkpoints
carry the list. The module is found on ``sys.path`` (installed, or its folder on ``PYTHONPATH``).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence


def import_modules(names: Sequence[str] | None, field: str = "custom_imports") -> None:
    """Import each module in ``names`` (once: Python caches them); a missing one fails naming it and the field."""
    for name in names or ():
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name and not name.startswith(err.name) and not err.name.startswith(name):
                raise  # the module exists, but something it imports does not: its own traceback says what
            raise ImportError(
                f"{field}: no module {name!r} to import; install it, or put its folder on PYTHONPATH"
            ) from None
