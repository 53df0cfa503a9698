"""The data path's speed and memory.

The program is tinygpt/bench/data.py (also the console command tinygpt-bench-data); see its docstring.
"""

from tinygpt.bench.data import main

if __name__ == "__main__":
    raise SystemExit(main())
