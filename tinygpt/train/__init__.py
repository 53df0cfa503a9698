"""Training: the LightningModule, its callbacks and the run that ties config, data and model together."""

from tinygpt.launch.resolvers import register_resolvers as _register_resolvers
from tinygpt.model.schema import register_model_schema
from tinygpt.train.schema import register_run_schemas

_register_resolvers()
register_model_schema()
register_run_schemas()
