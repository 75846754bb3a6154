"""Fail when a function is more complex than the project allows: radon's cyclomatic complexity.

Ruff's mccabe check (C90, the same limit) counts differently from radon (radon also counts the
``if`` of a comprehension and each boolean operator), so CI runs both.

Usage (from the repository root)::

    python tools/check_complexity.py langmem_paging evals tools
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from radon.complexity import cc_visit

LIMIT = 15


def too_complex(paths: list[str], limit: int = LIMIT) -> list[str]:
    """``path:line name (complexity)`` of every function or method above `limit` under `paths`."""
    found = []
    for root in paths:
        for path in sorted(Path(root).rglob("*.py")) if Path(root).is_dir() else [Path(root)]:
            for block in cc_visit(path.read_text(encoding="utf-8")):  # functions and methods (and classes)
                if block.complexity > limit and not hasattr(block, "methods"):
                    found.append(f"{path}:{block.lineno} {block.fullname} ({block.complexity})")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--limit", type=int, default=LIMIT)
    args = parser.parse_args()
    found = too_complex(args.paths, args.limit)
    for line in found:
        print(line)
    if found:
        sys.exit(f"{len(found)} function(s) above cyclomatic complexity {args.limit} (radon): split them")
    print(f"every function at cyclomatic complexity {args.limit} or less (radon)")


if __name__ == "__main__":
    main()
