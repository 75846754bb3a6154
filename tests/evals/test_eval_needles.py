"""The needle-density benchmark: datasets, NRR/ECR metrics, runner and CLI."""

from __future__ import annotations

import json
import re

import pytest

from evals.cli import main as evals_main
from evals.datasets.locomo import parse_sample
from evals.datasets.needles import generate_needles, locomo_needles, segment_bounds, segment_of
from evals.datasets.synthetic import _RELATIONS
from evals.metrics import effective_compression, needle_retention
from evals.needles import budget_for, run_conversation, summarize


def test_generator_places_exactly_one_needle_per_segment():
    item = generate_needles(n_turns=300, seed=4)
    conv = item.conversation
    index = {t.dia_id: i for i, t in enumerate(conv.turns)}
    text = {t.dia_id: t.text for t in conv.turns}
    segments = [segment_of(index[q.evidence[0]], len(conv.turns)) for q in conv.questions]
    assert segments == list(range(20)) == [n.segment for n in item.needles]
    for q in conv.questions:
        assert len(q.evidence) == 1 and q.answer in text[q.evidence[0]]
        # the needle's subject appears in no other turn: one answer per question
        who = re.search(rf"(?:{'|'.join(_RELATIONS)}) [A-Z][a-z]+", q.question).group(0)
        assert sum(who in t for t in text.values()) == 1, who
    assert item == generate_needles(n_turns=300, seed=4) != generate_needles(n_turns=300, seed=5)


def test_segments_are_equal_and_cover_every_turn():
    bounds = segment_bounds(103, 20)
    assert bounds[0][0] == 0 and bounds[-1][1] == 103
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))
    assert {e - s for s, e in bounds} <= {5, 6}
    assert all(segment_of(i, 103) == k for k, (s, e) in enumerate(bounds) for i in range(s, e))


def _locomo_like(n_turns: int, qa: list[dict]) -> dict:
    turns = [
        {"speaker": "Ana" if i % 2 == 0 else "Ben", "dia_id": f"D1:{i + 1}", "text": f"turn {i + 1}"}
        for i in range(n_turns)
    ]
    return {
        "sample_id": "conv-n",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1 May",
            "session_1": turns,
        },
        "qa": qa,
    }


def test_locomo_needles_take_one_question_whose_evidence_lies_in_the_segment():
    qa = [
        {"question": "two turns", "answer": "x", "evidence": ["D1:1", "D1:2"], "category": 4},
        {
            "question": "one turn",
            "answer": "x",
            "evidence": ["D1:3"],
            "category": 2,
        },  # fewer evidence: wins seg 0
        {"question": "spans", "answer": "x", "evidence": ["D1:4", "D1:9"], "category": 4},  # segments 0 and 1
        {"question": "adversarial", "answer": "x", "evidence": ["D1:10"], "category": 5},
        {"question": "seg 3", "answer": "x", "evidence": ["D1:20"], "category": 1},
    ]
    item = locomo_needles(parse_sample(_locomo_like(20, qa)), n_segments=4)  # segments of 5 turns
    assert [(n.segment, n.question_index) for n in item.needles] == [(0, 1), (3, 4)]
    assert item.covered == 2


def test_nrr_and_ecr_on_a_hand_made_case():
    assert effective_compression(2000, 500) == 0.75
    assert effective_compression(1000, 1000) == 0.0
    assert needle_retention(["D1:1", "D1:2"], {"D1:1", "D1:2", "D1:9"}) == 1.0
    assert needle_retention(["D1:1", "D1:2"], {"D1:1"}) == 0.0
    with pytest.raises(ValueError):
        needle_retention([], set())
    row = {"policy": "fifo", "reader": "bookmarks", "level": "B=500", "budget": 500}
    rows = [  # conversation a: 4 needles, ECR 0.75; b: 2 needles, ECR 0.5
        {
            **row,
            "sample_id": "a",
            "segment": s,
            "retained": r,
            "resident": res,
            "ecr": 0.75,
            "context_tokens": 400,
        }
        for s, r, res in [(0, 1.0, 0.0), (1, 0.0, 0.0), (2, 1.0, 1.0), (3, 1.0, 1.0)]
    ] + [
        {
            **row,
            "sample_id": "b",
            "segment": s,
            "retained": r,
            "resident": r,
            "ecr": 0.5,
            "context_tokens": 450,
        }
        for s, r in [(0, 0.0), (1, 1.0)]
    ]
    summary = summarize(rows)
    (only,) = summary["rows"]
    assert only["nrr"] == round(4 / 6, 4) and only["nrr_resident"] == 0.5
    assert only["ecr"] == 0.625  # mean over conversations, not over needles
    assert only["n_needles"] == 6 and only["n_conversations"] == 2
    seg0 = next(s for s in summary["by_segment"] if s["segment"] == 0)
    assert seg0["nrr"] == 0.5 and seg0["n"] == 2


def test_budget_levels():
    assert budget_for("B=1500", 10_000) == 1500
    assert budget_for("f=0.1", 10_000) == 1000
    with pytest.raises(ValueError):
        budget_for("x=1", 100)


def test_tighter_budget_compresses_more_and_retains_fewer_resident_needles():
    item = generate_needles(n_turns=200, seed=0)
    loose = run_conversation(item, policy="fifo", level="B=1600")
    tight = run_conversation(item, policy="fifo", level="B=500")
    assert tight[0]["ecr"] > loose[0]["ecr"] > 0
    assert sum(r["resident"] for r in tight) < sum(r["resident"] for r in loose)
    # fifo keeps the newest segments resident
    assert tight[-1]["resident"] == 1.0 and tight[0]["resident"] == 0.0


@pytest.mark.slow
def test_needles_cli_writes_curves_and_resumes(tmp_path):
    args = [
        "needles",
        "--on",
        "synthetic",
        "--out",
        str(tmp_path),
        "--budgets",
        "500,1000",
        "--policies",
        "fifo,lru",
        "--synthetic-conversations",
        "2",
        "--needle-turns",
        "160",
        "--segments",
        "8",
        "--no-progress",
    ]
    assert evals_main(args) == 0
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 1 + 2 * 2 * 2 * 8
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {(r["policy"], r["level"]) for r in summary["rows"]} == {
        (p, lv) for p in ("fifo", "lru") for lv in ("B=500", "B=1000")
    }
    assert {c["a"] for c in summary["comparisons"]} == {"lru"}
    assert all(c["clusters"] == 2 for c in summary["comparisons"])
    assert (tmp_path / "nrr_vs_ecr.png").stat().st_size > 0
    assert "NRR per segment" in (tmp_path / "summary.md").read_text()
    assert evals_main(args) == 0
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == len(lines)


def test_needles_cli_needs_a_compression_level(tmp_path):
    with pytest.raises(SystemExit):
        evals_main(["needles", "--out", str(tmp_path), "--no-progress"])
