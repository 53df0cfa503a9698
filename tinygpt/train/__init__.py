"""Training: the LightningModule, its callbacks and the run that ties config, data and model together."""

from tinygpt.train.resolvers import register as _register_resolvers

_register_resolvers()
