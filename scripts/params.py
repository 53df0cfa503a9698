"""Where a model's parameters are: python scripts/params.py [hydra overrides]

The program is tinygpt/cli/params.py (also installed as the console command tinygpt-params); see its docstring.
"""

from tinygpt.cli.params import main

if __name__ == "__main__":
    raise SystemExit(main())
