"""docs/choosing.md's advice on stacking paging with LangChain's ContextEditingMiddleware, checked:
listed first, paging pages the tool results as they are (and context editing clears old ones in the
prompt only); listed after context editing, paging receives the cleared copies and pages those, so
the originals are lost (a strict xfail until paging pages the state's messages rather than the
request's)."""

from __future__ import annotations

import itertools

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import PageStore, PagingMiddleware
from langmem_paging.testing import ScriptedChatModel


@tool
def lookup(city: str) -> str:
    """Weather report for a city."""
    return f"Report for {city}: " + "sunny and mild, light wind from the west. " * 8


_CALL_IDS = itertools.count()  # deterministic ids: random hex ids count differently, and moved the trigger


def _reply(messages):
    if isinstance(messages[-1], HumanMessage):
        return AIMessage(
            "",
            tool_calls=[
                {"name": "lookup", "args": {"city": messages[-1].content}, "id": f"c-{next(_CALL_IDS):06d}"}
            ],
        )
    return AIMessage("Done.")


def _paged_tool_results(paging_first: bool) -> list[str]:
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=900, boundary="fixed_4")
    editing = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=300, keep=1)])
    model = ScriptedChatModel(responses=[_reply] * 200)
    agent = create_agent(
        model,
        tools=[lookup],
        middleware=[paging, editing] if paging_first else [editing, paging],
        store=store,
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    for i in range(12):
        agent.invoke({"messages": [HumanMessage(f"city{i}")]}, config)
    assert any("[cleared]" in str(m.content) for m in model.prompts[-1])  # context editing did act
    pages = [p for k in range(1, 40) if (p := PageStore(store).get("t", f"p{k}")) is not None]
    results = [str(m.content) for p in pages for m in p.messages if isinstance(m, ToolMessage)]
    assert results, "no tool result was paged"
    return results


def test_paging_listed_before_context_editing_pages_tool_results_whole():
    assert all(r.startswith("Report for city") for r in _paged_tool_results(paging_first=True))


@pytest.mark.xfail(
    strict=True,
    reason="listed after ContextEditingMiddleware, paging pages the cleared copies "
    "it is handed: the original tool results are lost (see docs/choosing.md)",
)
def test_paging_listed_after_context_editing_pages_tool_results_whole():
    assert all(r.startswith("Report for city") for r in _paged_tool_results(paging_first=False))
