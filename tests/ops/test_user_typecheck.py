"""A user's script type-checks against the installed package: ``mypy --strict`` finds
`langmem_paging` and its ``py.typed`` however it was installed, the README's editable install
(``pip install -e .``) included. setuptools' default editable install is an import hook that
type checkers cannot follow; pyproject.toml's ``[tool.distutils.editable_wheel] mode = "compat"``
makes it a path entry they read."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("mypy", reason="mypy comes with the test extra")

SCRIPT = textwrap.dedent("""
    from langmem_paging import PagingConfig, PagingMiddleware, page_messages

    paging = PagingMiddleware(4000, policy="lfu")
    config: PagingConfig = paging.config
    budget: int | tuple[str, float] = config.max_tokens
    result = page_messages([], max_tokens=100)
    tokens: int = result.tokens
""")


def mypy(tmp_path, source):
    script = tmp_path / "app.py"
    script.write_text(source)
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir",
            os.devnull,
            script.name,
        ],
        cwd=tmp_path,  # not the repository: the package is found where it is installed, or not at all
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow  # mypy reads langchain and langgraph: about 75 s on a loaded 2-core machine
def test_mypy_strict_finds_the_installed_package_and_reads_its_types(tmp_path):
    done = mypy(tmp_path, SCRIPT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found in 1 source file" in done.stdout

    wrong = mypy(tmp_path, SCRIPT + "name: int = config.tool_name\n")  # the types are read, not Any
    assert wrong.returncode == 1
    assert (
        'Incompatible types in assignment (expression has type "str", variable has type "int")'
        in wrong.stdout
    )
