"""μP's coordinate check: python scripts/coordcheck.py [widths=[...]] [base=N] [steps=N] [training overrides]

The program is tinygpt/cli/coordcheck.py (also installed as the console command tinygpt-coordcheck); see its
docstring.
"""

from tinygpt.cli.coordcheck import main

if __name__ == "__main__":
    raise SystemExit(main())
