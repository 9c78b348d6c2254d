#!/usr/bin/env python3
"""`pickle report`: turns `pickle bench --json` result files into PNG plots and a Markdown report.

Usually started by `pickle report`, which picks a Python that can import matplotlib. Run directly:
    python3 report.py [-o DIR] FILE...
Exit codes: 0 report written, 1 an input could not be used or the report could not be written, 2 bad command line.
"""
import os
import sys

# The package sits next to this script; no bytecode caches in the source tree or in an install prefix.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pickle_report.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
