"""Import a local transformers folder:  python scripts/import_hf.py hf=<folder> out=<run folder> [data overrides]

The program is tinygpt/cli/import_hf.py (also installed as the console command tinygpt-import-hf); see its docstring.
"""

from tinygpt.cli.import_hf import main

if __name__ == "__main__":
    raise SystemExit(main())
