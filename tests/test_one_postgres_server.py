"""A test session starts one PostgreSQL server: only tests/conftest.py registers the `postgres_uri` fixture.

A test module that imports `postgres_uri_fixture` registers a second session-scoped fixture, and pytest
starts a second server for it (three ran at once before). Modules needing isolation call `fresh_database`.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _registers_postgres_uri(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(
            alias.name == "postgres_uri_fixture" for alias in node.names
        ):
            return True
        if isinstance(node, ast.FunctionDef) and node.name in {"postgres_uri", "postgres_uri_fixture"}:
            return True
    return False


def test_only_the_tests_conftest_registers_the_postgres_server_fixture():
    registering = sorted(
        str(path.relative_to(TESTS))
        for path in TESTS.rglob("*.py")
        if _registers_postgres_uri(ast.parse(path.read_text(), str(path)))
    )
    assert registering == ["conftest.py", "support/postgres_server.py"]
