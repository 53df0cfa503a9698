"""A sweep's report, above training: its jobs (what the command asked for, what is on disk), the spec's tables,
the validation curves, runs.csv, and (only when asked) the held-out scores. Reads finished run folders through
tinygpt/common/run_folder.py; imports nothing that trains."""
