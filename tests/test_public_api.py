"""The public API: every name imports from the path the README and docs give, and the package layout
stays what docs/architecture.md describes (layers in subpackages, a small top level)."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import langmem_paging

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "langmem_paging"
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
IMPORT = re.compile(r"^\s*from (langmem_paging[\w.]*) import \(?([\w, \n]+?)\)?$", re.MULTILINE)


def documented_imports() -> list[tuple[str, str, str]]:
    """(document, module, name) for every `from langmem_paging... import name` the docs show."""
    found = []
    for document in DOCUMENTS:
        for block in re.findall(r"```python\n(.*?)```", document.read_text(), re.DOTALL):
            for node in ast.walk(ast.parse(block)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("langmem_paging"):
                    found += [(document.name, node.module or "", alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize(("document", "module", "name"), documented_imports())
def test_every_documented_import_works(document: str, module: str, name: str) -> None:
    assert hasattr(importlib.import_module(module), name), f"{document}: from {module} import {name}"


def test_the_docs_show_imports_at_all() -> None:
    assert len(documented_imports()) >= 10


@pytest.mark.parametrize("name", langmem_paging.__all__)
def test_every_top_level_name_resolves(name: str) -> None:
    value = getattr(langmem_paging, name)
    assert value is not None
    assert name in dir(langmem_paging)


@pytest.mark.parametrize("package", ["langmem_paging.testing", "langmem_paging.ops", "langmem_paging.step"])
def test_every_subpackage_export_resolves(package: str) -> None:
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert missing == []


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'page_messagez'"):
        langmem_paging.page_messagez  # noqa: B018


def test_the_top_level_holds_at_most_fifteen_modules() -> None:
    modules = [p.name for p in PACKAGE.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()]
    assert len(modules) <= 15, sorted(modules)


def test_the_console_script_and_the_server_app_resolve() -> None:
    from langmem_paging.cli import main
    from langmem_paging.server import app

    assert callable(main) and app is not None
