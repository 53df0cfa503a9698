"""003's analyses of a trained run, into <run_dir>/analysis_<split>.md:  python scripts/analyze.py run_dir=<run>

The program is tinygpt/cli/analyze.py (also the console command tinygpt-analyze); see its docstring.
"""

from tinygpt.cli.analyze import main

if __name__ == "__main__":
    raise SystemExit(main())
