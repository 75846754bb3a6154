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


def specs() -> list[str]:
    """What pdoc is given: the package, its direct children, and the submodules of packages whose
    ``__all__`` hides them from pdoc (any other subpackage brings its own submodules; naming them
    again would add each twice)."""
    import importlib

    def hidden(name: str) -> bool:
        parent = name.rsplit(".", 1)[0]
        return hasattr(importlib.import_module(parent), "__all__")

    return [m for m in modules() if m.count(".") <= 1 or hidden(m)]


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
    pdoc.pdoc(*specs(), output_directory=args.out)
    pages = sorted(args.out.rglob("*.html"))
    print(f"API reference: {len(pages)} pages in {args.out}")
    missing = [
        m
        for m in modules()
        if not (args.out / (m.replace(".", "/") + ".html")).exists()
        and not (args.out / m.replace(".", "/") / "index.html").exists()
    ]
    if missing:
        print("not documented:", ", ".join(missing))
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
