"""The command-line programs: each module's `main` is both a console entry point and a scripts/*.py file.

pyproject.toml installs them as tinygpt-train, tinygpt-evaluate, tinygpt-generate, tinygpt-report,
tinygpt-params, tinygpt-export, tinygpt-import-hf, tinygpt-analyze, tinygpt-baselines, tinygpt-register,
tinygpt-data-stats and tinygpt-bench-train; scripts/<name>.py calls the same `main`, so the two are the same
program. Hydra's config_path is CONF, an absolute path and the one config location every program, script and test
composes from (a relative one is resolved against the *module*, pkg://..., when the function is imported rather
than run as __main__). The configs are conf/ at the root of a checkout; a wheel carries them as package data,
tinygpt/conf (pyproject.toml maps conf/ onto it), so an installed tinygpt-train finds them from any folder.
"""

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
# the one config location (programs, scripts, tests): an installed wheel's tinygpt/conf, else the checkout's conf/
CONF = str(
    next((p for p in (PACKAGE / "conf", PACKAGE.parent / "conf") if (p / "train.yaml").is_file()), PACKAGE / "conf")
)
