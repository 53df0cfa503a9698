"""The experiment trackers beside TensorBoard (Weights & Biases, MLflow): one tracker run per tinygpt run, named after
its sweep overrides, continued on resume and by its held-out scoring.

Why a file of their own: TensorBoard and the CSV log into the run folder, so a resumed run finds its history where
it left it. A tracker keeps its runs elsewhere (a wandb project, an MLflow store), so the run folder must remember
which tracker run is its own: ``trackers.json`` holds the wandb run id and the MLflow run id and store. A resumed
run continues that id (wandb ``resume="allow"``, MLflow ``run_id=``), and ``tinygpt-evaluate split=test`` adds
the held-out score to the same tracker run. A fresh start (resume from step 0) mints a new one.

A resumed run logs again the steps after its checkpoint: TensorBoard drops the old ones (``purge_step``), a
tracker keeps both values at those steps (neither wandb nor MLflow can rewind a run offline).

The defaults keep everything local: wandb runs offline (``logger.wandb.offline=false`` to upload), MLflow writes
to ``$MLFLOW_TRACKING_URI`` or a SQLite store under ``outputs/`` (MLflow 3 refuses its old file store).
"""

from __future__ import annotations

import importlib.util
import json
import secrets
from pathlib import Path
from typing import Any

from hydra.utils import get_class

from tinygpt.common.errors import ConfigError
from tinygpt.common.files import write_json_atomic

TRACKERS = "trackers.json"  # the run folder's tracker runs: {"wandb": {...}, "mlflow": {...}}
MLFLOW_DB = "mlflow.db"

# the logger classes that log elsewhere, by Lightning class name: (tracker, module it needs, tinygpt's extra)
EXTERNAL = {
    "WandbLogger": ("wandb", "wandb", "wandb"),
    "MLFlowLogger": ("mlflow", "mlflow", "mlflow"),
}


def tracker_of(cls: type) -> str | None:
    """'wandb' or 'mlflow' for a logger class that is (or extends) one of theirs, else None."""
    return next((EXTERNAL[c.__name__][0] for c in cls.__mro__ if c.__name__ in EXTERNAL), None)


def tracker_of_target(target: str) -> str | None:
    """The same for a Hydra ``_target_``."""
    return tracker_of(get_class(target))


def check_trackers(loggers: dict[str, Any]) -> None:
    """Refuse, in one line, a tracker whose package is not installed (before anything is written)."""
    for name, node in (loggers or {}).items():
        target = node.get("_target_", "")
        if not target.startswith("lightning.pytorch.loggers."):
            continue
        cls = target.rsplit(".", 1)[-1]
        if cls in EXTERNAL:
            _, module, extra = EXTERNAL[cls]
            if importlib.util.find_spec(module) is None:
                raise ConfigError(f"logger={name} needs {module}: pip install 'tinygpt[{extra}]'")


def trackers_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / TRACKERS


def read_trackers(run_dir: str | Path) -> dict:
    path = trackers_path(run_dir)
    return json.loads(path.read_text()) if path.is_file() else {}


def run_name(run_name_of_sweep: str, run_dir: Path) -> tuple[str, list[str]]:
    """The tracker run's name and tags: the run folder's name (a sweep job's folder is its overrides,
    ``model=tiny,seed=0``) under the sweep's ``name``, and each override as a tag."""
    tags = [part for part in run_dir.name.split(",") if "=" in part]
    return f"{run_name_of_sweep}/{run_dir.name}", tags


def tracker_kwargs(tracker: str, node: dict, run_dir: Path, resume_step: int, name: str) -> dict:
    """Constructor arguments for a tracker's logger in this run: its name, tags and where it logs, and the run id
    to continue when the run resumes (``resume_step`` > 0) and one was recorded."""
    known = read_trackers(run_dir).get(tracker, {}) if resume_step else {}
    title, tags = run_name(name, run_dir)
    if tracker == "wandb":
        return {
            "save_dir": str(run_dir),
            "name": title,
            "tags": tags,
            "group": name,
            "id": known.get("id") or secrets.token_hex(4),  # wandb's own ids: 8 lowercase letters and digits
            "resume": "allow",
        }
    store = Path(node.get("save_dir") or "outputs").resolve()
    uri = node.get("tracking_uri") or known.get("tracking_uri")
    artifacts = node.get("artifact_location")
    if uri is None:  # the default: a SQLite store, and its artifacts, in the outputs folder
        store.mkdir(parents=True, exist_ok=True)
        uri, artifacts = f"sqlite:///{store / MLFLOW_DB}", artifacts or (store / "mlartifacts").as_uri()
    return {
        "save_dir": str(store),
        "tracking_uri": uri,
        "run_name": title,
        "tags": {"tinygpt.run_dir": str(run_dir.resolve()), **dict(tag.split("=", 1) for tag in tags)},
        "run_id": known.get("run_id"),
        "artifact_location": artifacts,
    }


def remember(run_dir: Path, loggers: list) -> None:
    """Write which tracker runs are this run's into trackers.json (after the loggers have started them)."""
    known: dict[str, dict] = {}
    for logger in loggers:
        tracker = tracker_of(type(logger))
        if tracker == "wandb":
            experiment = logger.experiment
            known["wandb"] = {"id": experiment.id, "project": experiment.project, "dir": str(run_dir)}
        elif tracker == "mlflow":
            known["mlflow"] = {"run_id": logger.run_id, "tracking_uri": logger._tracking_uri}
    if known:
        write_json_atomic(trackers_path(run_dir), known)


def finish_trackers(loggers: list, status: str) -> None:
    """Close the run's wandb run (its history flushed to disk, marked failed unless the run finished or was
    pruned): one process may run several tinygpt runs (the Python API, a sweep in one process), and a wandb run
    left open would take the next run's metrics. MLflow's runs are ended by Lightning's ``finalize``."""
    for logger in loggers:
        if tracker_of(type(logger)) == "wandb" and logger._experiment is not None:
            logger.experiment.finish(exit_code=0 if status in ("finished", "pruned") else 1)


def where(logger) -> str | None:
    """Where a tracker logger's run is, for the run's last lines (its ``log_dir`` is None); None for other loggers."""
    tracker = tracker_of(type(logger))
    if tracker == "wandb":
        experiment = logger.experiment
        offline = " (offline: `wandb sync` uploads it)" if getattr(experiment, "offline", False) else ""
        return f"wandb run {experiment.id} in {experiment.dir}{offline}"
    if tracker == "mlflow":
        return f"MLflow run {logger.run_id} in {logger._tracking_uri}"
    return None


def log_held_out(run_dir: str | Path, scores: list[tuple[int, dict[str, float]]]) -> list[str]:
    """Add held-out scores, (step, metrics) each, to the run's tracker runs (those trackers.json names); returns the
    trackers logged to. wandb files them by ``trainer/global_step``, the x axis Lightning's WandbLogger gives the dev
    scores (wandb's own step only grows, and a checkpoint's step may be behind the run's last)."""
    known, done = read_trackers(run_dir), []
    if not scores:
        return done
    if "mlflow" in known and importlib.util.find_spec("mlflow") is not None:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(known["mlflow"]["tracking_uri"])
        for step, metrics in scores:
            for key, value in metrics.items():
                client.log_metric(known["mlflow"]["run_id"], key, value, step=step)
        done.append("mlflow")
    if "wandb" in known and importlib.util.find_spec("wandb") is not None:
        import wandb

        with wandb.init(
            id=known["wandb"]["id"],
            project=known["wandb"]["project"],
            dir=known["wandb"]["dir"],
            resume="allow",
            mode="offline" if _offline(known["wandb"]["dir"]) else "online",
        ) as tracked:
            for step, metrics in scores:
                tracked.log({**metrics, "trainer/global_step": step})
        done.append("wandb")
    return done


def _offline(run_dir: str) -> bool:
    """Whether the run's wandb history was written offline (its folder holds offline-run-* only)."""
    runs = list((Path(run_dir) / "wandb").glob("*run-*"))
    return bool(runs) and all(p.name.startswith("offline-run-") for p in runs)
