"""Fuzz the paging core from the command line: ``python tools/fuzz.py --help``.

The fuzzer itself is the `tools/fuzzing` package (this script's folder is on the path when it runs).
"""

import sys

from fuzzing import main

if __name__ == "__main__":
    sys.exit(main())
