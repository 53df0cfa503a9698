"""Export a checkpoint to Hugging Face transformers:  python scripts/export.py ckpt=<checkpoint> out=<folder>

The program is tinygpt/cli/export.py (also installed as the console command tinygpt-export); see its docstring.
"""

from tinygpt.cli.export import main

if __name__ == "__main__":
    raise SystemExit(main())
