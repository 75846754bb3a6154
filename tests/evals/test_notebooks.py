"""Notebooks execute (on a small synthetic subset), so they cannot rot, and never write the results
they ship."""

import hashlib
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
DATA = ROOT / "notebooks" / "data"


def _digests() -> dict[str, str]:
    return {
        str(p.relative_to(DATA)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(DATA.rglob("*"))
        if p.is_file()
    }


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes_without_touching_the_committed_results(path, tmp_path, monkeypatch):
    monkeypatch.setenv("ABLATION_DIR", str(tmp_path / "ablation"))
    monkeypatch.setenv("NEEDLES_DIR", str(tmp_path / "needles"))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # evals/ is not an installed package
    before = _digests()
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    assert (tmp_path / "ablation" / "summary.json").exists()
    assert _digests() == before


def test_there_are_notebooks():
    assert NOTEBOOKS


def test_the_notebook_ships_the_full_runs_findings():
    """The committed findings come from the full runs: every policy (and on synthetic every boundary), and
    intervals of width > 0."""
    import json

    findings = json.loads((DATA / "ablation" / "findings.json").read_text())["findings"]
    intervals = [f["ci95"] for f in findings if f["ci95"] is not None]
    assert intervals and all(high > low for low, high in intervals)
    boundaries = {"fixed_10", "fixed_20", "fixed_40", "tokens_500", "session", "topic_shift"}
    for name, policies in (
        ("synthetic", {"fifo", "lru", "lfu", "semantic"}),
        ("locomo", {"fifo", "semantic"}),
        ("synthetic-streaming", {"fifo", "lru", "lfu", "semantic"}),
        ("locomo-streaming", {"fifo", "lru", "lfu", "semantic"}),
    ):
        rows = json.loads((DATA / "ablation" / name / "summary.json").read_text())["rows"]
        assert {r["policy"] for r in rows} == policies
        assert {r["boundary"] for r in rows} == (boundaries if "streaming" not in name else {"fixed_20"})
