"""Score 003's baselines on a corpus, on the same scale, splits and scored positions as the GPT's bits per byte.

The program is tinygpt/cli/baselines.py (also the console command tinygpt-baselines); see its docstring.
"""

from tinygpt.cli.baselines import main

if __name__ == "__main__":
    raise SystemExit(main())
