"""Sweeps: automatic placement of multirun jobs on devices, and the report that turns a sweep into tables.

Importing this package registers the resolvers that the launcher configs use: ``tinygpt.parallel_jobs``
(placement's ``n_jobs``, conf/hydra/launcher/placement.yaml) and ``tinygpt.device_count`` (SLURM tasks per
run, conf/hydra/launcher/slurm.yaml). ``tinygpt.train.run`` imports this package, and so does every launcher
worker that unpickles the task function.
"""

from omegaconf import OmegaConf

from tinygpt.sweep.devices import device_count, parallel_jobs


def register_resolvers() -> None:
    for name, function in (("tinygpt.parallel_jobs", parallel_jobs), ("tinygpt.device_count", device_count)):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, function)


register_resolvers()
