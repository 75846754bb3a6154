"""Build the API reference from the docstrings: ``python tools/build_api_docs.py build/api``.

pdoc documents a package's submodules only when its ``__all__`` names them, and langmem_paging's
``__all__`` is the public names (imported lazily), so every module is passed by name here. A module
whose optional dependency is missing (``server`` without starlette, ``search_postgres`` without
psycopg) is skipped by pdoc with a warning; with ``.[docs]`` installed none is.
"""

from __future__ import annotations

import argparse
import pkgutil
from pathlib import Path

import langmem_paging


def modules() -> list[str]:
    """Every module of the package, the package first."""
    found = pkgutil.walk_packages(langmem_paging.__path__, prefix="langmem_paging.")
    return ["langmem_paging", *sorted(m.name for m in found)]


def main(argv: list[str] | None = None) -> int:
    import warnings

    import pdoc
    import pdoc.render

    # Annotations naming TYPE_CHECKING-only imports cannot be resolved; pdoc shows them as written.
    warnings.filterwarnings("ignore", message="Error parsing type annotation", category=UserWarning)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "out", type=Path, nargs="?", default=Path("build/api"), help="output folder (gitignored)"
    )
    args = parser.parse_args(argv)
    pdoc.render.configure(docformat="google", search=True)
    pdoc.pdoc(*modules(), output_directory=args.out)
    pages = sorted(args.out.rglob("*.html"))
    print(f"API reference: {len(pages)} pages in {args.out}")
    return 0 if len(pages) > len(modules()) // 2 else 1


if __name__ == "__main__":
    raise SystemExit(main())
