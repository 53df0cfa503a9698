"""Training: the LightningModule, its callbacks and the run that ties config, data and model together."""

from tinygpt.launch.resolvers import register_resolvers as _register_resolvers

_register_resolvers()
