"""Where a training step's time goes (003's timing table).

The program is tinygpt/bench/step_parts.py (also the console command tinygpt-step-parts); see its docstring.
"""

from tinygpt.bench.step_parts import main

if __name__ == "__main__":
    raise SystemExit(main())
