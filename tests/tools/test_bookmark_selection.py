"""tools/bookmark_selection.py: its breakdown is the evaluation's own page selection, split by
where it fails (a breakdown that ranks differently from the eval would explain another reader)."""

from __future__ import annotations

import sys
from pathlib import Path

from evals.datasets.synthetic import generate
from evals.runner import run_unit

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import bookmark_selection  # noqa: E402


def test_the_breakdown_ranks_as_the_evaluation_and_every_question_lands_in_one_class():
    conv = generate(n_turns=240, n_facts=8, seed=3, distractors=False, updates=0)
    result = bookmark_selection.breakdown([conv], budget=700, policy="lfu", boundary="fixed_10")
    counts = result["counts"]
    assert counts["questions"] > 0, "some evidence was paged out"
    classes = ("unknown_evidence", "multi_page", "ranked_first", "ranked_2_3", "ranked_lower", "not_ranked")
    assert sum(counts[c] for c in classes) == counts["questions"]
    unit = {"method": "paging[bookmarks]", "budget": 700, "boundary": "fixed_10", "policy": "lfu"}
    rows = [r for r in run_unit(conv, unit, "end") if r["category"] != 5]
    selected = [r["page_selection_top1"] for r in rows if r["page_selection_top1"] is not None]
    assert len(selected) == counts["questions"]
    assert result["top1"] == round(sum(selected) / len(selected), 3)
    ranked = counts["ranked_first"] + counts["ranked_2_3"] + counts["ranked_lower"]
    assert counts["stored_keywords_share_word"] >= ranked, "the lexical reader ranks shared words only"
