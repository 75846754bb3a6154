"""Notebooks execute (on a small synthetic subset), so they cannot rot."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path, tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATION_DIR", str(tmp_path / "ablation"))
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parents[2]))  # evals/ is not an installed package
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert (tmp_path / "ablation" / "summary.json").exists()


def test_there_are_notebooks():
    assert NOTEBOOKS
