"""The bottom layer: small helpers every other package may use, importing nothing else of tinygpt.

``files.atomic_write`` (a file appears whole or not at all) and ``modes.eval_mode`` (run a model in eval mode,
then give it back its mode). Kept free of torch and Lightning imports so that any layer, even a launcher
worker that must start fast, can use them.
"""
