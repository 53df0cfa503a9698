"""Time training steps: tokens/s and MFU per shape, precision and switch, Lightning against a plain loop.

The program is tinygpt/bench/train.py (also the console command tinygpt-bench-train); see its docstring.
"""

from tinygpt.bench.train import main

if __name__ == "__main__":
    raise SystemExit(main())
