"""Training: the LightningModule, its callbacks and the run that ties config, data and model together."""
