"""The built wheel works outside the repository: `create_paging_agent` ships in the package.

Builds the wheel from a copy of what the wheel is made of (``pip wheel --no-deps``), installs it in
a fresh venv (its dependencies from the package index, as a user gets them), and runs a few turns
of `create_paging_agent` on `ScriptedChatModel` from a directory that is not the repository, so
neither the repo's ``langmem_paging/`` nor its ``graphs/`` can be imported by accident.
About 15-20 s with a warm pip cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
WHEEL_SOURCES = ["pyproject.toml", "README.md", "LICENSE", "langmem_paging"]

SCRIPT = textwrap.dedent("""
    import importlib.util, sys
    import langmem_paging
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore
    from langmem_paging import create_paging_agent
    from langmem_paging.testing import ScriptedChatModel

    assert importlib.util.find_spec("graphs") is None, "the repo's graphs/ is importable"
    print("module", langmem_paging.__file__)
    agent = create_paging_agent(ScriptedChatModel(responses=["Noted."] * 4), store=InMemoryStore(),
                                checkpointer=InMemorySaver(), max_tokens=170, boundary="fixed_2",
                                bookmark_share=0.3)
    config = {"configurable": {"thread_id": "t1"}}
    for city in ["Lisbon", "Kyoto", "Quito", "Oslo"]:
        state = agent.invoke({"messages": [f"I will fly to {city} on Friday."]}, config)
    print("contents", [m.content for m in state["messages"]])
    print("page p1", [m.content for m in agent.paging.page_store.get("t1", "p1").messages])
""")


def _run(command: list[str], **kwargs) -> subprocess.CompletedProcess:
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False, **kwargs)
    assert run.returncode == 0, f"{' '.join(command)}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run


@pytest.mark.slow
def test_wheel_installed_outside_the_repo_runs_create_paging_agent(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in WHEEL_SOURCES:
        copy = shutil.copytree if (REPO_ROOT / name).is_dir() else shutil.copyfile
        kwargs = {"ignore": shutil.ignore_patterns("__pycache__", "*.pyc")} if copy is shutil.copytree else {}
        copy(REPO_ROOT / name, source / name, **kwargs)
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(source)])
    wheel = next(dist.glob("langmem_paging-*.whl"))

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", str(wheel)])

    work = tmp_path / "elsewhere"
    work.mkdir()
    (work / "check.py").write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    out = _run([str(python), "check.py"], cwd=work, env=env).stdout

    module = Path(out.split("module ", 1)[1].splitlines()[0])
    assert module.is_relative_to(venv) and not module.is_relative_to(REPO_ROOT), module
    assert (
        "contents ['[p1:Lisbon fly Noted,Friday]', '[p2:Kyoto fly Noted,Friday]', "
        "'[p3:Quito fly Noted,Friday]', 'I will fly to Oslo on Friday.', 'Noted.']"
    ) in out
    assert "page p1 ['I will fly to Lisbon on Friday.', 'Noted.']" in out
