"""Register a search's winner as an experiment, pre-registered to be scored once.

The program is tinygpt/cli/register.py (also the console command tinygpt-register); see its docstring.
"""

from tinygpt.cli.register import main

if __name__ == "__main__":
    raise SystemExit(main())
