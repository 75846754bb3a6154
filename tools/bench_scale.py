"""Scale benchmark from the command line: ``python tools/bench_scale.py --help``.

The benchmark itself is the `tools/benchscale` package (what it measures: `tools/benchscale/cli.py`).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tools/ and evals/ (not installed)
from tools.benchscale import main  # noqa: E402

if __name__ == "__main__":
    main()
