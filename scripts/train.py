"""Train a GPT:  python scripts/train.py [overrides]      a sweep:  python scripts/train.py -m a=1,2 seed=0,1

The program is tinygpt/cli/train.py (also installed as the console command tinygpt-train); see its docstring.
"""

from tinygpt.cli.train import main

if __name__ == "__main__":
    raise SystemExit(main())
