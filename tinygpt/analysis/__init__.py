"""Analysis of trained models: measurements that explain a score rather than produce one (per-document costs,
repeats, unseen characters, memorization), read from a run's checkpoints and written beside its record."""
