"""How the evals present themselves: readable plots, help for every option, a progress bar that
counts questions, and the ablation notebook committed with its outputs."""

from __future__ import annotations

import argparse
import json
import re
from itertools import combinations
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="pip install -e '.[evals]'")

from evals.cli import build_parser  # noqa: E402
from evals.cli import main as evals_main  # noqa: E402
from evals.needles import nrr_figure  # noqa: E402
from evals.report import coverage_figure  # noqa: E402

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "ablation.ipynb"


def _rows(points: dict[str, list[tuple[float, float]]]) -> list[dict]:
    return [
        {"method": m, "mean_context_tokens": x, "evidence_coverage": y}
        for m, pts in points.items()
        for x, y in pts
    ]


def _no_overlap(labels, renderer) -> bool:
    boxes = [t.get_window_extent(renderer) for t in labels]
    return not any(a.overlaps(b) for a, b in combinations(boxes, 2))


@pytest.mark.parametrize("span", [(300, 480), (55, 1700), (40, 250_000)])
def test_coverage_plot_has_plain_token_labels_that_do_not_collide(span):
    low, high = span
    step = (high - low) / 8
    fig = coverage_figure(
        _rows(
            {
                f"method{k}": [(low + k * step, 0.1 * k), (low + (k + 0.5) * step, 0.1 * k + 0.05)]
                for k in range(9)
            }
        )
    )
    fig.canvas.draw()
    ax, renderer = fig.axes[0], fig.canvas.get_renderer()
    lo, hi = ax.get_xlim()
    labels = [
        t
        for t in ax.get_xticklabels()
        if t.get_visible() and t.get_text() and lo <= t.get_position()[0] <= hi
    ]
    assert len(labels) >= 2
    assert all(re.fullmatch(r"\d{1,3}(,\d{3})*", t.get_text()) for t in labels), [
        t.get_text() for t in labels
    ]
    assert _no_overlap(labels, renderer)
    assert not [
        t.get_text() for t in ax.get_xticklabels(minor=True) if t.get_text()
    ]  # no 3x10^2 under minor ticks


def test_points_on_top_of_each_other_all_stay_visible():
    same = [(120.0, 1.0), (480.0, 1.0)]
    fig = coverage_figure(_rows(dict.fromkeys(("bm25", "bm25_stem", "word_overlap", "paging"), same)))
    lines = fig.axes[0].get_lines()
    looks = [(ln.get_marker(), ln.get_markerfacecolor() == "none", ln.get_markersize()) for ln in lines]
    assert len(set(looks)) == len(lines)  # no two identical markers
    filled = [ln for ln in lines if ln.get_markerfacecolor() != "none"]
    hollow = [ln for ln in lines if ln.get_markerfacecolor() == "none"]
    assert filled and hollow and all(ln.get_alpha() < 1 for ln in filled)
    assert min(ln.get_zorder() for ln in hollow) > max(ln.get_zorder() for ln in filled)  # outlines on top


def test_needle_plot_lines_differ_in_marker():
    rows = [
        {"policy": p, "reader": "bookmarks", "ecr": e, "nrr": 0.5, "nrr_resident": 0.4}
        for p in ("fifo", "lru", "lfu", "semantic")
        for e in (0.5, 0.8)
    ]
    lines = [ln for ln in nrr_figure({"rows": rows}).axes[0].get_lines() if ln.get_linestyle() == "-"]
    assert (
        len(lines) == 4 and len({(ln.get_marker(), ln.get_markerfacecolor() == "none") for ln in lines}) == 4
    )


def test_every_evals_option_has_help():
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert {c.dest for c in sub._choices_actions} == set(sub.choices) and all(
        c.help for c in sub._choices_actions
    )
    missing = [
        f"{name} {opt}"
        for name, p in sub.choices.items()
        for a in p._actions
        if a.option_strings and a.help != argparse.SUPPRESS and not a.help
        for opt in a.option_strings[:1]
    ]
    assert missing == []
    for name, p in sub.choices.items():
        assert "`" not in p.format_help(), name


def test_progress_bar_counts_questions(tmp_path, capsys):
    # 2 conversations x 4 questions x 2 methods at one budget: 16 questions in 4 units
    assert (
        evals_main(
            [
                "synthetic",
                "--out",
                str(tmp_path),
                "--budgets",
                "600",
                "--synthetic-turns",
                "160",
                "--synthetic-facts",
                "4",
                "--synthetic-conversations",
                "2",
                "--methods",
                "truncation,bm25",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert re.search(r"eval: 100%\|[^|]*\| 16/16 \[[^\]]*question/s\]", err), err[-500:]


def test_ablation_notebook_is_committed_with_its_outputs():
    cells = [c for c in json.loads(NOTEBOOK.read_text())["cells"] if c["cell_type"] == "code"]
    assert all(c.get("execution_count") for c in cells)
    outputs = [o for c in cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert (
        len(images) == 3
    )  # the boundary x policy heatmaps (synthetic, LoCoMo) and the needle plot, shown on a forge
    tables = ["".join(o["data"]["text/markdown"]) for o in outputs if "text/markdown" in o.get("data", {})]
    assert any("| budget | boundary | policy |" in t for t in tables)
