"""Parallel recalls share the room among the distinct pages asked for, not among the calls.

Six parallel calls for p1, p2, p1, p2, p1, p2 at B=700 split the room six ways (64 tokens
each): p2 did not fit and was never shown, yet two results said "p2: in the result of your
other recall call (c1)", which held no p2, and p2's access count still grew. Here through
create_agent, whose tool schemas take ~240 of `max_tokens=900`: a message budget of ~660.
"""

from __future__ import annotations

import re

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingMiddleware, PagingState, PagingWarning
from langmem_paging.testing import ScriptedChatModel

FACTS = [
    f"Note {i}: my cousin Vesna{i} keeps {i + 3} beehives behind the mill in Kranj{i}." for i in range(24)
]
ASKED = ["p1", "p2", "p1", "p2", "p1", "p2"]


def _run(ids: list[str], max_tokens: int = 900):
    calls = AIMessage(
        "",
        id="calls",
        tool_calls=[
            {"name": "recall", "args": {"page_ids": [pid]}, "id": f"c{k + 1}"} for k, pid in enumerate(ids)
        ],
    )
    model = ScriptedChatModel(responses=["Noted."] * len(FACTS) + [calls, "Done."])
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=max_tokens, boundary="fixed_4", policy="fifo", store=store)
    agent = create_agent(model, tools=[], middleware=[paging], checkpointer=InMemorySaver(), store=store)
    config = {"configurable": {"thread_id": "parallel"}}
    for fact in FACTS:
        agent.invoke({"messages": [fact]}, config)
    before = PagingState.from_value(agent.get_state(config).values["paging"])
    state = agent.invoke({"messages": ["What did my notes say about the beehives?"]}, config)
    results = {m.tool_call_id: m.content for m in state["messages"] if isinstance(m, ToolMessage)}
    return paging, before, PagingState.from_value(state["paging"]), results


def _count(state: PagingState, page_id: str) -> int:
    shown = state.shown.get(page_id)
    return shown.count if shown is not None else (state.stats.get(page_id) or [0])[0]


def test_six_parallel_recalls_of_two_pages_show_both_and_point_only_to_a_sibling_holding_the_page():
    paging, before, after, results = _run(ASKED)
    assert {"p1", "p2"} <= {p for p in ["p1", "p2"] if p not in before.pages}, "both pages are paged out"
    pages = {pid: paging.page_store.get("parallel", pid) for pid in ("p1", "p2")}
    for pid, page in pages.items():
        assert page is not None
        first_line = str(page.messages[0].content)[:30]
        assert any(first_line in text for text in results.values()), (
            f"{pid}'s text is in no result: {results}"
        )
    for call_id, text in results.items():
        for pid, sibling in re.findall(r"(p\d+): in the result of your other recall call \((c\d+)\)", text):
            assert f"=== {pid} " in results[sibling], (
                f"{call_id} points to {sibling} for {pid}; it holds none"
            )
    for pid in ("p1", "p2"):
        assert _count(after, pid) - _count(before, pid) == 1, f"{pid} counted once: it was served once"


def test_a_page_no_result_can_hold_gets_no_pointer_and_no_access():
    """Twelve distinct pages asked at once: the room per page is too small for some of them."""
    ids = [f"p{k}" for k in range(1, 13)]
    with pytest.warns(
        PagingWarning, match="needs .* tokens"
    ):  # twelve calls with their results pass the budget
        paging, before, after, results = _run(ids)
    for text in results.values():
        for pid, sibling in re.findall(r"(p\d+): in the result of your other recall call \((c\d+)\)", text):
            assert f"=== {pid} " in results[sibling]
    for k, pid in enumerate(ids):
        if pid in before.pages:
            continue  # asked while still in the context
        shown = f"=== {pid} " in results[f"c{k + 1}"]
        grew = _count(after, pid) - _count(before, pid)
        assert grew == (1 if shown else 0), (pid, shown, grew)


@pytest.mark.parametrize("ids", [ASKED])
def test_the_room_is_shared_among_distinct_pages_not_calls(ids):
    from langmem_paging.integrations.recall_tool import _shares

    message = AIMessage(
        "",
        tool_calls=[
            {"name": "recall", "args": {"page_ids": [p]}, "id": f"c{k + 1}"} for k, p in enumerate(ids)
        ],
    )
    assert [_shares(message, f"c{k + 1}", "recall")[:2] for k in range(6)] == [(1, 2), (1, 2)] + [(0, 2)] * 4
