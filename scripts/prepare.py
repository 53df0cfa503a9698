"""Prepare a corpus once: its train and dev splits encoded into a folder every later run maps.

The program is tinygpt/cli/prepare.py (also the console command tinygpt-prepare); see its docstring.
"""

from tinygpt.cli.prepare import main

if __name__ == "__main__":
    raise SystemExit(main())
