"""The llm reader, run for real: `openai` client -> local OpenAI-compatible server on 127.0.0.1.

The server plays the model with a script that behaves like a cooperative reader: it answers
the gold answer when the answer's text is in front of it, otherwise calls `recall` on the
bookmark sharing most words with the question (or `search` with the question), otherwise
says it is not mentioned. The judge replies CORRECT when the gold answer is in the answer.
"""

from __future__ import annotations

import json
import re

import pytest

from evals.answer_f1 import locomo_f1
from evals.cli import main as evals_main
from evals.datasets.synthetic import generate
from evals.judge import parse_verdict
from evals.paging_method import PagingSession
from evals.readers.llm import LLMReader
from evals.runner import run_unit
from tests.support.openai_stub import OpenAIStub, tool_call

BOOKMARK = re.compile(r"\[([pc]\d+):([^\]]*)\]")
NOT_THERE = "Not mentioned in the conversation."


def _text(message: dict) -> str:
    content = message.get("content") or ""
    return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


class CooperativeScript:
    """Plays both the answering model and the judge."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    def __call__(self, body: dict) -> dict:
        messages = body["messages"]
        if len(messages) == 1 and _text(messages[0]).startswith("You grade answers"):
            prompt = _text(messages[0])
            gold = re.search(r"Gold answer: (.*)", prompt).group(1)
            answer = re.search(r"Generated answer: (.*)", prompt).group(1)
            return {"content": "CORRECT" if gold.lower() in answer.lower() else "WRONG"}
        q_at = max(
            i
            for i, m in enumerate(messages)  # bookmarks are user messages too
            if m["role"] == "user" and not BOOKMARK.fullmatch(_text(m).strip())
        )
        question = _text(messages[q_at])
        gold = self.answers[question]
        seen = "\n".join(_text(m) for i, m in enumerate(messages) if i != q_at and m["role"] != "system")
        if gold.lower() in BOOKMARK.sub("", seen).lower():  # the full text, not a bookmark's keyword
            return {"content": gold}
        tools = {t["function"]["name"] for t in body.get("tools", [])}
        results = [_text(m) for m in messages[q_at:] if m["role"] == "tool"]
        if body.get("tool_choice") != "none" and "recall" in tools and len(results) < 2:
            # a cluster listing comes back first when the best bookmark was a cluster's
            bookmarks = BOOKMARK.findall(results[-1] if results else seen)
            if results and "<cluster" not in results[-1]:
                bookmarks = []
            if bookmarks:
                best = max(bookmarks, key=lambda b: (len(_words(b[1]) & _words(question)), b[0][0] == "p"))
                return tool_call("recall", page_ids=[best[0]])
        if body.get("tool_choice") != "none" and "search" in tools and not results:
            return tool_call("search", query=question)
        return {"content": NOT_THERE}


@pytest.fixture
def conversation():
    return generate(n_turns=160, n_facts=6, seed=0)  # as `--synthetic-conversations 1`


@pytest.fixture
def stub(conversation, monkeypatch):
    with OpenAIStub(CooperativeScript({q.question: q.answer for q in conversation.questions})) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        yield server


def _unit(method: str, budget: int = 600) -> dict:
    return {
        "method": method,
        "budget": budget,
        "boundary": "fixed_10" if method == "paging" else None,
        "policy": "lfu" if method == "paging" else None,
        "protocol": "end",
    }


@pytest.mark.slow
def test_paging_agent_recalls_evicted_evidence_through_the_openai_client(stub, conversation):
    reader = LLMReader.from_env("stub-model", judge_model="stub-judge")
    # 1200: the system prompt and the recall tool's schema take ~380 of it
    rows = run_unit(conversation, _unit("paging", 1200), "end", reader)

    assert len(rows) == len(conversation.questions)
    needed = [r for r in rows if r["needs_recall"]]
    assert needed and all(r["recall_triggered"] for r in needed)
    assert all(r["page_selection_top1"] is not None for r in needed)
    recovered = [r for r in needed if r["evidence_coverage"] == 1.0]
    assert recovered, "a recall must bring some evicted evidence back into the context"
    for r in rows:  # the script answers right exactly when the evidence text reached it
        if r["evidence_coverage"] == 1.0:
            assert (r["answer"], r["answer_f1"], r["judge"]) == (r["gold"], 1.0, 1.0)
        assert r["context_tokens"] <= 1200 + 40  # the budget, plus the model's own tool-call message
    # the model's tool call reached the recall tool, and the page's exact text came back to the model
    text = {t.dia_id: t.text for t in conversation.turns}
    after_recall = [b for b in stub.requests if any(m["role"] == "tool" for m in b["messages"])]
    evidence = [text[e] for r in recovered for e in r["evidence"]]
    assert any(
        any(e in _text(m) for m in b["messages"] if m["role"] == "tool")
        for b in after_recall
        for e in evidence
    )
    assert {b["model"] for b in stub.requests} == {"stub-model", "stub-judge"}
    assert any("recall" in {t["function"]["name"] for t in b.get("tools", [])} for b in stub.requests)


def test_search_tool_and_one_call_methods(stub, conversation):
    reader = LLMReader.from_env("stub-model")
    search_rows = run_unit(conversation, _unit("search_tool"), "end", reader)
    assert any(r["recall_triggered"] for r in search_rows if r["needs_recall"])
    assert any(r["evidence_coverage"] == 1.0 and r["needs_recall"] for r in search_rows)
    for r in search_rows:
        assert r["context_tokens"] <= 600 + 40
        if r["evidence_coverage"] == 1.0:
            assert r["answer_f1"] == 1.0
    before = len(stub.requests)
    bm25_rows = run_unit(conversation, _unit("bm25"), "end", reader, max_questions=3)
    assert len(bm25_rows) == 3 and all(
        r["model_calls"] == 1 and r["recall_triggered"] is None for r in bm25_rows
    )
    assert not any(b.get("tools") for b in stub.requests[before:] if b["model"] == "stub-model")


def test_model_errors_come_back_as_tool_messages_and_the_last_call_must_answer(conversation, monkeypatch):
    def stubborn(body):
        if body.get("tool_choice") == "none":
            return {"content": "I could not find it."}
        return tool_call("recall", page_ids="p999, banana")

    with OpenAIStub(stubborn) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        reader = LLMReader.from_env("stub-model", max_model_calls=2)
        session = PagingSession(600, "fixed_10", "fifo")
        for turn in conversation.turns:
            from evals.conversation import turn_message

            session.add(turn_message(turn, "User"))
        context, answer = session.ask_llm(conversation.questions[0].question, reader)
    assert answer.text == "I could not find it." and answer.error is None
    assert [b.get("tool_choice") for b in server.requests] == [None, "none"]
    tool_reply = next(_text(m) for m in server.requests[1]["messages"] if m["role"] == "tool")
    assert "No such page or cluster in this conversation: p999" in tool_reply and "'banana'" in tool_reply
    assert context.recalled == []


def test_a_refused_request_is_recorded_and_the_run_goes_on(conversation, monkeypatch):
    with OpenAIStub(lambda body: 400) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        rows = run_unit(conversation, _unit("bm25"), "end", LLMReader.from_env("stub-model"), max_questions=2)
    assert [r["answer"] for r in rows] == [None, None]
    assert all("Error code: 400" in r["error"] and r["answer_f1"] is None for r in rows)


@pytest.mark.slow
def test_cli_llm_reader_writes_answer_metrics_and_resumes(stub, tmp_path, capsys):
    out = tmp_path / "llm"
    argv = [
        "synthetic",
        "--reader",
        "llm",
        "--model",
        "stub-model",
        "--budgets",
        "1200",
        "--methods",
        "paging,bm25,search_tool",
        "--boundary",
        "fixed_10",
        "--synthetic-turns",
        "160",
        "--synthetic-facts",
        "6",
        "--synthetic-conversations",
        "1",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert evals_main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    paging = next(r for r in summary["rows"] if r["method"] == "paging")
    assert paging["recall_trigger_rate"] == 1.0 and paging["answer_f1"] > 0 and paging["judge_score"] > 0
    assert summary["header"]["reader"]["model"] == "stub-model"
    assert "answer_f1" in (out / "summary.md").read_text() and "answer_f1" in capsys.readouterr().out
    calls = len(stub.requests)
    assert evals_main(argv) == 0 and len(stub.requests) == calls  # resumed: nothing asked twice


def test_streaming_ablation_with_the_llm_reader_keeps_recalls_in_the_thread(stub, tmp_path):
    out = tmp_path / "ablate"
    assert (
        evals_main(
            [
                "ablate",
                "--on",
                "synthetic",
                "--reader",
                "llm",
                "--model",
                "stub-model",
                "--protocol",
                "streaming",
                "--boundaries",
                "fixed_10",
                "--policies",
                "lru",
                "--budgets",
                "600",
                "--synthetic-turns",
                "160",
                "--synthetic-facts",
                "6",
                "--synthetic-conversations",
                "1",
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()[1:]]
    assert len(rows) == 6 and all(r["answer"] for r in rows)
    # a later question's prompt still holds the earlier exchange (or its bookmark): the thread persisted
    questions = [b for b in stub.requests if b["model"] == "stub-model"]
    assert any(
        NOT_THERE in " ".join(_text(m) for m in b["messages"])
        or any(m["role"] == "tool" for m in b["messages"][:-1])
        for b in questions[3:]
    )


def test_llm_reader_needs_an_endpoint(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        evals_main(["synthetic", "--reader", "llm", "--out", str(tmp_path), "--no-progress"])
    assert exit_info.value.code == 2 and "OPENAI_API_KEY" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("prediction", "gold", "category", "expected"),
    [
        ("May 7, 2023", "7 May 2023", 2, 1.0),  # commas dropped, bag of tokens
        ("the cat", "a cat", 4, 1.0),  # articles dropped
        ("she runs", "running", 4, 0.6667),  # Porter stems: run/run
        ("likely yes", "Likely yes; she loves books", 3, 1.0),  # open-domain: before ';'
        ("pottery, camping", "pottery, painting, camping", 1, 0.6667),  # multi-hop: per gold part
        ("Sweden", "Sweden", 5, 0.0),  # adversarial: must decline
        ("No information available.", "Sweden", 5, 1.0),
        (None, "Sweden", 4, 0.0),
        ("Oslo", "Lisbon", 4, 0.0),
    ],
)
def test_locomo_f1_rules(prediction, gold, category, expected):
    assert locomo_f1(prediction, gold, category) == expected


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("CORRECT", 1.0),
        ("wrong.", 0.0),
        ("Verdict: WRONG (not CORRECT)", 0.0),
        ("unsure", None),
        (None, None),
    ],
)
def test_judge_verdicts(reply, verdict):
    assert parse_verdict(reply) == verdict


@pytest.mark.parametrize("method", ["paging", "search_tool"])
def test_questions_asked_concurrently_give_the_same_rows(stub, conversation, method):
    reader = LLMReader.from_env("stub-model")
    assert run_unit(conversation, _unit(method), "end", reader, workers=4) == run_unit(
        conversation, _unit(method), "end", reader, workers=1
    )


def test_locomo_cli_with_the_llm_reader_scores_by_category(tmp_path, monkeypatch):
    from tests.evals.test_evals import OFFICIAL_SAMPLE

    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([OFFICIAL_SAMPLE]))

    def respond(body):
        prompt = _text(body["messages"][-1])
        if prompt.startswith("You grade answers"):
            return {"content": "CORRECT" if "Generated answer: Miso" in prompt else "WRONG"}
        return {"content": {"Cat's name?": "Miso", "Dog?": NOT_THERE}.get(prompt, "a lake")}

    with OpenAIStub(respond) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        out = tmp_path / "out"
        assert (
            evals_main(
                [
                    "locomo",
                    "--data",
                    str(data),
                    "--reader",
                    "llm",
                    "--model",
                    "stub-model",
                    "--methods",
                    "full_context",
                    "--budgets",
                    "4000",
                    "--out",
                    str(out),
                    "--no-progress",
                ]
            )
            == 0
        )
    rows = {r["category"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines()[1:])}
    assert (rows[1]["answer"], rows[1]["answer_f1"], rows[1]["judge"]) == ("Miso", 1.0, 1.0)
    assert (rows[5]["answer_f1"], rows[5]["judge"]) == (1.0, None)  # adversarial: declined, never judged
    assert (rows[4]["answer"], rows[4]["answer_f1"], rows[4]["judge"]) == ("a lake", 1.0, 0.0)
    assert not any(b["model"] != "stub-model" for b in server.requests)
