"""Turn a sweep into the spec's table and figure:  python scripts/report.py outputs/sweeps/<name>

The program is tinygpt/cli/report.py (also installed as the console command tinygpt-report); see its docstring.
"""

from tinygpt.cli.report import main

if __name__ == "__main__":
    raise SystemExit(main())
