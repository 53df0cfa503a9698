"""Train a GPT:  python scripts/train.py [overrides]      a sweep:  python scripts/train.py -m a=1,2 seed=0,1

Each job writes into a folder named after its overrides (outputs/runs/<name>/... or
outputs/sweeps/<name>/...): TensorBoard logs, checkpoints/last.ckpt, kept checkpoints, run.json.
Rerunning the same command resumes unfinished jobs and skips finished ones.
"""

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from tinygpt.cli import CONF
from tinygpt.cli.config import register_configs
from tinygpt.cli.entry import entry, task
from tinygpt.common.run_folder import DEV_BITS_PER_BYTE
from tinygpt.common.say import say
from tinygpt.export.export import export_refusal
from tinygpt.launch.orphans import exit_if_orphaned
from tinygpt.train.callbacks.last_checkpoint import TrainingInterrupted
from tinygpt.train.preflight import take_checked
from tinygpt.train.run import train

register_configs()  # the typed schemas (tinygpt/cli/config.py), before Hydra composes


@entry(("hydra.run.dir", "hydra.sweep.dir", "ckpt_path", "data.path", "data.root"))
@hydra.main(config_path=CONF, config_name="train", version_base="1.3")
@task
def main(cfg: DictConfig) -> float | None:
    try:
        # the run its preflight callback parsed (tinygpt/train/preflight.py); a user's mistake: one line (cli/entry.py)
        record = train(cfg, HydraConfig.get().runtime.output_dir, take_checked(), export_refusal)
    except TrainingInterrupted as stop:
        # A signal stops the whole command, a sweep too: Hydra's launchers record a job's exception and start
        # the next job, so an Exception would stop only the job that was running (a sweep killed with SIGTERM
        # went on to its next job). SystemExit is not an Exception and passes them; the exit code is the
        # shell's 128 + signal number. Rerunning the same command resumes this job and skips finished ones.
        say(str(stop), error=True)
        exit_if_orphaned()  # a worker whose launcher is gone exits now (Hydra's on_job_end will not run)
        sys.exit(128 + stop.signum)
    return (record.get("best") or {}).get(DEV_BITS_PER_BYTE)  # a sweeper's objective


if __name__ == "__main__":
    main()
