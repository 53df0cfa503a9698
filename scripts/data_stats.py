"""Corpus and tokenizer statistics with the default splits, printed (and written into docs/data.md with write=true).

The program is tinygpt/cli/data_stats.py (also the console command tinygpt-data-stats); see its docstring.
"""

from tinygpt.cli.data_stats import main

if __name__ == "__main__":
    main()
