"""A tool call and its results form one unit: a page cut never splits them, and one unanswered
call does not stop paging."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from tests.support.conversations import town_turns as _turns
from tests.support.harness import assert_valid_chat, replay
from tests.support.scenario_helpers import FACTS, page_at_user_turns


def test_a_malformed_tool_call_stays_with_its_error_result():
    bad = AIMessage(
        "",
        invalid_tool_calls=[
            {
                "name": "search",
                "args": '{"q": "trunc',
                "id": "bad1",
                "error": "Invalid JSON",
                "type": "invalid_tool_call",
            }
        ],
        id="t1",
    )
    error = ToolMessage("Error: invalid JSON in the arguments", tool_call_id="bad1", id="e1", status="error")
    history = (
        _turns(6)
        + [
            HumanMessage("search please", id="q"),
            bad,
            error,
            AIMessage("Sorry, let me answer instead.", id="fin"),
        ]
        + _turns(6, start=6)
    )
    run = replay(history, max_tokens=60, boundary="fixed_1", token_counter=len)
    for result in run.steps:
        assert_valid_chat(result.view)  # never a tool message right after a bookmark
    for page in run.pages.values():
        ids = [m.id for m in page.messages]
        assert ("t1" in ids) == ("e1" in ids)


def test_unanswered_call_keeps_paging() -> None:
    """One unanswered tool call does not stop paging for the rest of the thread."""
    history = [SystemMessage("sys", id="sys")]
    for i in range(30):
        history.append(HumanMessage(FACTS[i], id=f"h{i}"))
        if i == 3:
            history.append(
                AIMessage("", tool_calls=[{"name": "lookup", "args": {}, "id": "open"}], id="dangling")
            )
        history.append(AIMessage(f"ok {i}", id=f"a{i}"))
    steps = page_at_user_turns(history, max_tokens=150, boundary="fixed_2")
    over = sum(result.tokens > 150 for result in steps)
    assert not over, f"{over} steps over budget after the unanswered call"
