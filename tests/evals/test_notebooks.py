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
    """The committed findings come from the full suite (`python -m evals ablation-suite`): every run at
    every budget, every policy (every boundary on the grids), one commit, and intervals of width > 0
    wherever something was measured (none: nothing paged out, or policies that scored alike on every
    question, which the end protocol makes of FIFO, LRU and LFU)."""
    import json

    from evals.ablation_suite import BOUNDARIES, SUITE

    record = json.loads((DATA / "ablation" / "findings.json").read_text())
    budgets = [2000, 4000, 8000]
    assert record["budgets"] == budgets
    assert len({run["git_commit"] for run in record["runs"].values()}) == 1
    findings = record["findings"]
    names = list(dict.fromkeys(f["finding"] for f in findings))
    assert sorted((f["finding"], f["budget"]) for f in findings) == sorted(
        (n, b) for n in names for b in budgets
    )
    measured = [
        f["ci95"]
        for f in findings
        if f["ci95"] is not None
        and not f["verdict"].startswith("not measurable")
        and "level on every question" not in f["verdict"]
    ]
    assert len(measured) >= 2 * len(budgets) and all(high > low for low, high in measured)
    for run in SUITE:
        rows = json.loads((DATA / "ablation" / run.name / "summary.json").read_text())["rows"]
        assert {r["budget"] for r in rows} == set(budgets)
        assert {r["policy"] for r in rows} == set(run.policies)
        assert {r["boundary"] for r in rows} == (set(BOUNDARIES) if run.grid else {"fixed_20"})
        assert {r["protocol"] for r in rows} == {run.protocol}
