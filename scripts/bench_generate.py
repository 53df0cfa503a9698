"""Generation speed with and without the KV cache.

The program is tinygpt/bench/generate.py (also the console command tinygpt-bench-generate); see its docstring.
"""

from tinygpt.bench.generate import main

if __name__ == "__main__":
    raise SystemExit(main())
