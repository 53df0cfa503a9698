"""Score checkpoints in bits per byte on the dev split or, only when asked, on the held-out test split.

The program is tinygpt/cli/evaluate.py (also installed as the console command tinygpt-evaluate); see its docstring.
"""

from tinygpt.cli.evaluate import main

if __name__ == "__main__":
    raise SystemExit(main())
