"""Train a GPT:  python scripts/train.py [overrides]      a sweep:  python scripts/train.py -m a=1,2 seed=0,1

Each job writes into a folder named after its overrides (outputs/runs/<name>/... or
outputs/sweeps/<name>/...): TensorBoard logs, checkpoints/last.ckpt, kept checkpoints, run.json.
Rerunning the same command resumes unfinished jobs and skips finished ones.
"""

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

import tinygpt.train  # noqa: F401  (registers the config's resolvers)
from tinygpt.cli import CONF
from tinygpt.train.run import train


@hydra.main(config_path=CONF, config_name="train", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    record = train(cfg, HydraConfig.get().runtime.output_dir)
    return (record.get("best") or {}).get("dev_bpb")  # a sweeper's objective


if __name__ == "__main__":
    main()
