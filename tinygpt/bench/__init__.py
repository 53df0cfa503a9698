"""The benchmark programs (tinygpt-bench-train, -bench-generate, -bench-data, -step-parts) and the page they publish
to docs/benchmarks/: measurements of tinygpt itself, apart from the commands a user types to train and score."""
