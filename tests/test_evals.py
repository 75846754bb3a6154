"""The evaluation harness: loader, synthetic generator, methods at matched budgets, metrics, runner."""

from __future__ import annotations

import json

import pytest

from evals.cli import main as evals_main
from evals.conversation import to_messages
from evals.datasets.locomo import parse_sample
from evals.datasets.synthetic import generate
from evals.methods import METHODS
from evals import methods as method_lib
from evals.metrics import evidence_coverage, page_selection, paired_bootstrap
from evals.paging_method import PagingSession
from evals.runner import ask_schedule

OFFICIAL_SAMPLE = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ana", "speaker_b": "Ben",
        "session_1_date_time": "1:00 pm on 1 May, 2023",
        "session_1": [{"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat."},
                      {"speaker": "Ben", "dia_id": "D1:2", "text": "Look!", "blip_caption": "a photo of a lake",
                       "img_url": ["x"]}],
        "session_2_date_time": "2:00 pm on 9 May, 2023",
        "session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "The cat is named Miso."}],
    },
    "qa": [{"question": "Cat's name?", "answer": "Miso", "evidence": ["D1:1; D2:1"], "category": 1},
           {"question": "Dog?", "adversarial_answer": "Rex", "evidence": [], "category": 5},
           {"question": "Photo?", "answer": "a lake", "evidence": ["D:1:02", "D9:9"], "category": 4}],
}


def test_official_format_parses_with_captions_and_joined_evidence():
    conv = parse_sample(OFFICIAL_SAMPLE)
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D2:1"]
    assert conv.turns[1].text == "Look! [shares a photo: a photo of a lake]"
    assert conv.questions[0].evidence == ("D1:1", "D2:1")
    assert conv.questions[1].answer == "Rex" and conv.questions[1].category == 5
    assert conv.questions[2].evidence == ("D1:2",)  # malformed id read, id of no turn dropped
    assert conv.turns[2].session == 2 and conv.turns[2].date == "2:00 pm on 9 May, 2023"


def test_synthetic_is_seeded_and_plants_findable_facts():
    a, b = generate(n_turns=200, n_facts=8, seed=3), generate(n_turns=200, n_facts=8, seed=3)
    assert a == b and a != generate(n_turns=200, n_facts=8, seed=4)
    text = {t.dia_id: t.text for t in a.turns}
    for q in a.questions:
        assert q.answer in text[q.evidence[0]]
    assert any(q.category == 2 for q in generate(n_turns=400, n_facts=20, seed=1, updates=1.0).questions)


def test_streaming_schedule_never_looks_ahead():
    conv = generate(n_turns=400, n_facts=10, seed=2, turns_per_session=40)
    index = {t.dia_id: i for i, t in enumerate(conv.turns)}
    for at, qis in ask_schedule(conv, "streaming").items():
        for qi in qis:
            assert all(index[e] <= at for e in conv.questions[qi].evidence)
            evidence_session = conv.turns[index[conv.questions[qi].evidence[0]]].session
            assert conv.turns[at].session > evidence_session or at == len(conv.turns) - 1


@pytest.mark.parametrize("method", [m for m in METHODS if m not in ("full_context", "paging")])
@pytest.mark.parametrize("budget", [300, 1200])
def test_retrieval_methods_stay_within_the_same_budget(method, budget):
    conv = generate(n_turns=200, n_facts=8, seed=5)
    history = to_messages(conv)
    context = getattr(method_lib, method)(history, conv.questions[0].question, budget)
    assert context.tokens <= budget
    assert context.messages[-1].content == conv.questions[0].question


@pytest.mark.parametrize("policy", ["fifo", "lfu"])
def test_paging_method_stays_within_budget_and_reader_finds_planted_fact(policy):
    conv = generate(n_turns=240, n_facts=6, seed=0, distractors=False, updates=0)
    session = PagingSession(budget=900, boundary="fixed_10", policy=policy)
    for message in to_messages(conv):
        session.add(message)
    hits = 0
    for q in conv.questions:
        context = session.ask(q.question)
        assert context.tokens <= 900
        hits += evidence_coverage(q.evidence, context.present)
    assert hits >= len(conv.questions) // 2  # names in bookmarks make planted facts findable


def test_metrics():
    assert evidence_coverage(["D1:1", "D1:2"], {"D1:1"}) == 0.0
    assert evidence_coverage([], {"D1:1"}) is None
    assert page_selection(["D1:1"], {"D1:1"}, [], 1) is None
    assert page_selection(["D1:1", "D2:1"], {"D2:1"}, [["D1:5"], ["D1:1"]], 1) == 0.0
    assert page_selection(["D1:1", "D2:1"], {"D2:1"}, [["D1:5"], ["D1:1"]], 3) == 1.0
    boot = paired_bootstrap([1, 1, 1, 0], [0, 0, 1, 0])
    assert boot["diff"] == 0.5 and boot["ci95"][0] <= 0.5 <= boot["ci95"][1]


def test_cli_runs_writes_results_and_resumes(tmp_path, capsys):
    args = ["synthetic", "--out", str(tmp_path), "--budgets", "600", "--synthetic-turns", "160",
            "--synthetic-facts", "4", "--synthetic-conversations", "2", "--no-progress"]
    assert evals_main(args) == 0
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    assert head["type"] == "header" and "git_commit" in head and head["config"]["budgets"] == [600]
    names = [m for m in METHODS if m != "paging"] + ["paging[bookmarks]"]
    assert len(lines) == 1 + 2 * 4 * len(names)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {r["method"] for r in summary["rows"]} == set(names)
    for row in summary["rows"]:
        assert {"method", "budget", "evidence_coverage", "mean_context_tokens", "n_questions"} <= set(row)
        if row["method"] not in ("full_context",):
            assert row["mean_context_tokens"] <= 600
    assert (tmp_path / "coverage_vs_tokens.png").stat().st_size > 0
    assert evals_main(args) == 0  # resume: nothing left to run, nothing duplicated
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == len(lines)


def test_ablation_rows_have_boundary_and_policy(tmp_path):
    args = ["ablate", "--on", "synthetic", "--out", str(tmp_path), "--budgets", "500",
            "--boundaries", "fixed_10,topic_shift", "--policies", "fifo,semantic", "--synthetic-turns", "120",
            "--synthetic-facts", "3", "--synthetic-conversations", "1", "--no-progress"]
    assert evals_main(args) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    rows = summary["rows"]
    # no fixed_20/fifo cell here: every cell is compared with the first one run, paired per question
    assert [(c["a"], c["b"]) for c in summary["comparisons"]] == [
        ("fixed_10/semantic", "fixed_10/fifo"), ("topic_shift/fifo", "fixed_10/fifo"),
        ("topic_shift/semantic", "fixed_10/fifo"), ("topic_shift/semantic", "topic_shift/fifo")]
    assert all(c["n"] == 3 for c in summary["comparisons"])
    assert {(r["boundary"], r["policy"]) for r in rows} == {
        ("fixed_10", "fifo"), ("fixed_10", "semantic"), ("topic_shift", "fifo"), ("topic_shift", "semantic")}
    for r in rows:
        assert {"evidence_coverage", "page_selection_top1", "mean_bookmark_tokens"} <= set(r)
    assert (tmp_path / "ablation_heatmap.png").exists()


def test_tiny_pages_no_longer_push_paging_contexts_over_the_budget():
    # topic_shift on synthetic filler makes tiny pages: in 0.1 their bookmarks alone outgrew a
    # 400-token budget; cluster bookmarks now keep them within their share
    conv = generate(n_turns=300, n_facts=6, seed=0)
    session = PagingSession(400, "topic_shift", "fifo")
    for message in to_messages(conv):
        session.add(message)
        assert session.paging == {} or session.paging["tokens"] <= 400
    result = session.step([*session.state], session.paging)
    assert not result.over_budget
    bookmark_tokens = sum(s["tokens"] for s in session.paging["shown"].values()) + sum(
        c["tokens"] for c in session.paging["clusters"].values())
    assert bookmark_tokens <= 0.2 * 400
    context = session.ask(conv.questions[0].question)
    assert not context.over_budget and context.tokens <= 400
    assert context.present <= {m.id for m in context.messages} | {
        m.id for p in session.pages.values() for m in p.messages}


def test_cap_to_budget_keeps_the_tail_and_tool_groups_whole():
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    call = AIMessage("", tool_calls=[{"name": "recall", "args": {}, "id": "c1"}], id="a")
    msgs = [HumanMessage("old " * 50, id="h0"), call, ToolMessage("x " * 50, tool_call_id="c1", id="t"),
            HumanMessage("question", id="q")]
    kept, over = method_lib.cap_to_budget(msgs, 75, keep_from=3)  # 54 + (13 + 54) + 4 tokens
    assert over and [m.id for m in kept] == ["a", "t", "q"]
    kept, over = method_lib.cap_to_budget(msgs, 20, keep_from=3)
    assert over and [m.id for m in kept] == ["q"]
    assert method_lib.cap_to_budget(msgs, 10**6) == (msgs, False)
