"""EleutherAI's lm-evaluation-harness on a checkpoint: python scripts/lm_eval.py <checkpoint or run folder> tasks=...

The program is tinygpt/cli/lm_eval.py (also installed as the console command tinygpt-lm-eval); see its docstring.
"""

import sys
from pathlib import Path

# Python puts this file's folder first on sys.path, where this file would be found as the harness's `lm_eval`
# package; the harness is the installed one.
sys.path[:] = [p for p in sys.path if not (Path(p or ".") / "lm_eval.py").is_file()]

from tinygpt.cli.lm_eval import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
