"""A recall result fits the room it is given: notes, notices and the model's echoed input included,
and the next prompt stays within budget."""

from __future__ import annotations

import warnings

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore

from langmem_paging import Pager, PageStore, PagingConfig, PagingMiddleware, PagingState
from langmem_paging.core.messages import METADATA_KEY
from langmem_paging.testing import ScriptedChatModel
from tests.support.harness import COUNTER
from tests.support.scenario_helpers import fact_exchanges, step_exchanges


@pytest.mark.parametrize("length", [100_000])
def test_a_huge_query_is_not_echoed_past_the_cap(length):
    from langmem_paging.runtime.pager import plan_recall

    plan = plan_recall(["x" * length, "p1"], "q" * length)
    assert plan.page_ids == ["p1"] and all(len(m) <= 40 for m in plan.malformed)


@pytest.mark.parametrize("reasoning_words", [0, 120])
def test_a_search_recall_that_fills_the_room_keeps_the_next_prompt_within_budget(reasoning_words):
    """The recall result was sized from what was protected before the call: the calling message
    and the bookmarks of the pages pushed out to make room went over (4,088 for 4,000 in the eval)."""
    budget = 700
    paging = PagingMiddleware(max_tokens=budget, boundary="fixed_2", store=InMemoryStore())
    facts = [
        f"Note {i}: the beekeeper Zarko{i} keeps {i} beehives near Lake Bled and sells honey."
        for i in range(40)
    ]
    call = AIMessage(
        " ".join(["thinking"] * reasoning_words),
        tool_calls=[{"name": "recall", "args": {"query": "beehives honey Lake Bled beekeeper"}, "id": "c1"}],
    )
    model = ScriptedChatModel(responses=["Noted, thanks for telling me."] * len(facts) + [call, "done"])
    agent = create_agent(model, tools=[], middleware=[paging], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for fact in facts:
        agent.invoke({"messages": [fact]}, config)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "needs N tokens but the budget is B"
        state = agent.invoke({"messages": ["What do you know about the beehives?"]}, config)
    result = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    if not reasoning_words:
        cap = result.artifact[METADATA_KEY]["spec"]["max_tokens"]
        assert COUNTER.count_text(result.content) > cap // 2  # it did fill the room, not a small part of it
    assert result.content.count("\n=== p") + result.content.startswith("=== p") >= 2
    message_budget = budget - COUNTER.count_tools(paging.tools)
    assert COUNTER(model.prompts[-1]) <= message_budget


def _paged_pager(turns=20, max_tokens=400):

    pager = Pager(PagingConfig(max_tokens=max_tokens, boundary="fixed_2"), PageStore(InMemoryStore()))
    state, messages = None, []
    for i in range(turns):
        messages = add_messages(
            messages,
            [
                HumanMessage(f"Note {i}: Zarko{i} keeps {i} beehives near Lake Bled.", id=f"h{i}"),
                AIMessage("ok", id=f"a{i}"),
            ],
        )
        result = pager.step(messages, state, "t")
        messages, state = result.apply(messages), result.state.to_value()
    return pager, state


@pytest.mark.parametrize(
    "args",
    [
        {"page_ids": [f"p{i}" for i in range(1, 2000)]},
        {"page_ids": [f"p{i}" for i in range(1, 2000)], "query": "zebra " * 20_000},
        {"page_ids": ["q" * 50_000, "p1", "p2", "p3"]},
    ],
)
def test_a_recall_result_fits_its_cap_with_its_notes_and_notice(args):
    """B3: the notes and the 'size cap reached ... not shown' notice were not counted against the cap."""
    from langmem_paging.core.state import PagingState

    pager, state = _paged_pager()
    cap = pager.room_for(PagingState.from_value(state))
    answer = pager.recall("t", state, **args)
    assert "=== p" in answer.content and COUNTER.count_text(answer.content) <= cap


def test_recall_cap_with_huge_query() -> None:
    """Recall's size cap holds with a 100 KB query echoed in its note."""
    store = InMemoryStore()
    pager = Pager(PagingConfig(max_tokens=400, boundary="fixed_2"), PageStore(store))
    value, _ = step_exchanges(pager, fact_exchanges(20))
    cap = pager.room_for(PagingState.from_value(value))  # the room the pager gives one call
    for args in (
        {"query": "x" * 100_000},
        {"query": "zebra " * 20_000},
        {"page_ids": ["q" * 50_000]},
        {"page_ids": [f"p{i}" for i in range(1, 2000)]},
    ):
        answer = pager.recall("t", value, **args)
        tokens = COUNTER.count_text(answer.content)
        assert tokens <= cap, f"{tokens} tokens > cap {cap} for {str(args)[:40]}"


def test_recall_cap_counts_its_notice() -> None:
    """A recall result asking for many pages stays within its size cap, notice included."""
    pager = Pager(PagingConfig(max_tokens=400, boundary="fixed_2"), PageStore(InMemoryStore()))
    value, _ = step_exchanges(pager, fact_exchanges(20))
    cap = pager.room_for(PagingState.from_value(value))  # the room the pager gives one call
    answer = pager.recall("t", value, page_ids=[f"p{i}" for i in range(1, 200)])
    tokens = COUNTER.count_text(answer.content)
    assert tokens <= cap, f"{tokens} tokens > cap {cap}"
