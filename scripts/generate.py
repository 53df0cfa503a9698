"""Sample from a checkpoint with the KV cache.

The program is tinygpt/cli/generate.py (also installed as the console command tinygpt-generate); see its docstring.
"""

from tinygpt.cli.generate import main

if __name__ == "__main__":
    raise SystemExit(main())
