"""Launching runs: device placement of multirun jobs, device leases, multi-device guards, orphaned workers,
and the OmegaConf resolvers the launcher configs use.

The layer below ``tinygpt.train``: it imports nothing else of tinygpt, so the training run can ask it for a
device and the run folder's lock without the two packages leaning on each other. The resolvers are
registered by ``tinygpt.launch.resolvers.register_resolvers``, which ``tinygpt.cli.config.register_configs`` calls
(each entry point calls it before composing; ``tinygpt.cli.train`` at import, so also inside every launcher worker
that unpickles the task function).
"""
