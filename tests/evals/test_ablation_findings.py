"""The ablation's bookmark-strategy specs and the study's findings table."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import HumanMessage

from evals.policy_spec import FrequentBookmarker, paging_options, parse_spec
from evals.report import _verdict, study_findings
from langmem_paging import KeywordBookmarker, PageDraft, TokenCounter
from langmem_paging.strategies.bookmarks import BookmarkContext, DiscriminativeBookmarker, as_bookmarker


def test_a_spec_names_its_bookmark_strategy():
    assert parse_spec("lfu+bookmarks:discriminative").bookmarker == "discriminative"
    assert parse_spec("stae:beta=0.5+tiers:utility+bookmarks:frequent").tiers == "utility"
    assert isinstance(paging_options("lfu+bookmarks:discriminative")["bookmarker"], DiscriminativeBookmarker)
    assert isinstance(paging_options("fifo+bookmarks:frequent")["bookmarker"], FrequentBookmarker)
    assert "bookmarker" not in paging_options("lfu")


def test_an_unknown_bookmark_strategy_lists_the_valid_ones():
    with pytest.raises(
        ValueError,
        match="unknown bookmarker 'tfidf'. Available: 'keywords', 'compact', 'discriminative', 'frequent'",
    ):
        paging_options("lfu+bookmarks:tfidf")


def test_the_frequent_heuristic_ignores_how_common_a_word_is_in_the_thread():
    page = PageDraft(
        "p2", [HumanMessage("The greyhound chased the greyhound; then bread.", id="m1", name="Jon")]
    )
    context = BookmarkContext(
        count_text=TokenCounter().count_text, doc_freq={"greyhound": 9, "bread": 1}, n_docs=10
    )
    specific = as_bookmarker(None).bookmark([page], context)[0].keywords
    frequent = FrequentBookmarker().bookmark([page], context)[0].keywords
    assert specific.index("bread") < specific.index("greyhound")
    assert frequent.index("greyhound") < frequent.index("bread")


def test_the_frequent_heuristic_shows_its_words_as_the_default_does():
    """It differs from the default bookmarker in specificity alone: same form (the compact one)."""
    page = PageDraft(
        "p2", [HumanMessage("The greyhound chased the greyhound; then bread and cake.", id="m1")]
    )
    context = BookmarkContext(count_text=TokenCounter().count_text)
    default, frequent = as_bookmarker(None), FrequentBookmarker()
    assert isinstance(default, KeywordBookmarker) and frequent.separator == default.separator
    assert "," not in frequent.bookmark([page], context)[0].text


def test_a_verdict_needs_the_whole_interval_on_the_studys_side():
    assert _verdict({"diff": -0.3, "ci95": [-0.4, -0.2]}, -1) == "reproduces"
    assert _verdict({"diff": -0.1, "ci95": [-0.2, 0.05]}, -1).startswith("direction only")
    assert _verdict({"diff": 0.1, "ci95": [0.05, 0.2]}, -1) == "does not reproduce"
    assert _verdict({"diff": -0.1, "ci95": [-0.2, -0.05]}, -1, -0.4).startswith(
        "direction reproduces, size does not"
    )


def _rows(path, cells):
    """A results.jsonl of two conversations x two questions per (boundary, policy): `cells` maps a
    cell to its four coverage values."""
    lines = [{"type": "header"}]
    for (boundary, policy), values in cells.items():
        for k, value in enumerate(values):
            lines.append(
                {
                    "type": "question",
                    "budget": 100,
                    "boundary": boundary,
                    "policy": policy,
                    "sample_id": f"s{k // 2}",
                    "question_index": k % 2,
                    "category": 1,
                    "evidence": ["D1:1"],
                    "evidence_coverage": value,
                    "page_selection_top1": value,
                }
            )
    path.mkdir()
    (path / "results.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_study_findings_set_each_claim_beside_a_paired_difference(tmp_path):
    grid = {
        (b, p): [1, 1, 1, 1] if b == "fixed_20" else [0, 1, 0, 0]
        for b in ("fixed_20", "topic_shift")
        for p in ("fifo", "lru", "lfu", "semantic")
    }
    grid[("topic_shift", "lfu")] = [1, 1, 1, 1]
    synthetic = _rows(tmp_path / "syn", grid)
    locomo = _rows(tmp_path / "loc", grid)
    bookmarks = _rows(
        tmp_path / "bm",
        {
            ("fixed_20", "lfu"): [1, 1, 0, 1],
            ("fixed_20", "lfu+bookmarks:keywords"): [0, 1, 0, 1],
            ("fixed_20", "lfu+bookmarks:discriminative"): [1, 1, 1, 1],
            ("fixed_20", "lfu+bookmarks:frequent"): [0, 1, 0, 0],
        },
    )
    rows = {
        r["finding"]: r
        for r in study_findings(
            synthetic, bookmarks, synthetic_policies=synthetic, locomo_policies=locomo, budgets=[100]
        )
    }
    drop = rows["topic_shift collapses to 56.7% (synthetic): topic_shift - fixed_20, synthetic"]
    assert drop["ours"] == -0.75 and drop["study"] == -0.4
    assert rows["fixed_20 pages reach 96.7% (synthetic)"]["ours"] == 1.0
    gain = rows["bookmark strategy discriminative - heuristic (frequent words), evidence_coverage"]
    assert gain["ours"] == 0.75 and gain["study"] == 0.087
    default = rows["bookmark strategy compact (default) - heuristic (frequent words), evidence_coverage"]
    assert default["ours"] == 0.5 and default["study"] == 0.044
    form = rows["compact bookmarks (default) beat the comma form: compact - keywords, evidence_coverage"]
    assert form["ours"] == 0.25 and form["study"] is None
    assert rows["keyword specificity alone (thread IDF on - off), LoCoMo, page_selection_top1"]["ours"] == 0.5
    lfu = rows["LFU is the best policy on LoCoMo (streaming): lfu - best other"]
    assert lfu["ours"] == 0.375 and lfu["verdict"] == "reproduces"  # pooled over both boundaries


def test_the_table_by_budget_says_each_verdict_in_a_few_words_keeping_who_won():
    from evals.report import _short

    assert _short("does not reproduce: lru is higher") == "no: lru higher"
    assert (
        _short("does not reproduce: semantic is highest (lfu's deficit's interval includes 0)")
        == "no: semantic highest, interval includes 0"
    )
    assert (
        _short("not shown: fifo, lru, lfu level on every question")
        == "no: fifo = lru = lfu on every question"
    )
    assert _short("not measurable: no evidence was paged out at this budget") == "nothing paged out"
    assert _short("lower here by 0.060") == "lower by 0.060"
    assert _short("direction reproduces, size does not (the study's value is outside the interval)") == (
        "direction, not size"
    )
