"""A thread never sees another thread's pages, nor another store's pages under the same thread id."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore

from langmem_paging import PageStore, PagingMiddleware
from langmem_paging.testing import ScriptedChatModel
from tests.support.scenario_helpers import FACTS, scripted_agent


def test_threads_never_read_each_others_pages_through_recall():
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=500, boundary="fixed_2", store=store)
    call = AIMessage("", tool_calls=[{"name": "recall", "args": {"query": "Bay3 tide"}, "id": "q"}])
    model = ScriptedChatModel(responses=["Noted."] * 20 + [call, "done"])
    agent = create_agent(model, middleware=[paging], store=store, checkpointer=InMemorySaver())
    for i in range(20):
        agent.invoke(
            {"messages": [f"Secret {i}: the tide at Bay{i} turns at {i} pm."]},
            {"configurable": {"thread_id": "alice"}},
        )
    state = agent.invoke({"messages": ["what about the tide?"]}, {"configurable": {"thread_id": "bob"}})
    result = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert "Secret" not in result.content and PageStore(store).list_pages("bob") == []


def test_two_stores_with_the_same_thread_id_never_share_search_results():
    # 0.2.0-dev kept one search index per process, keyed by thread id only: a pager over another
    # store ranked its own pages by the first store's text for the same thread id

    def build(paging, text):
        state, messages = None, []
        for i in range(30):
            messages = add_messages(
                messages, [AIMessage("Noted.", id=f"a{i}"), HumanMessage(text.format(i=i), id=f"h{i}")]
            )
            result = paging.pager.step(messages, state, "t")
            messages, state = result.apply(messages), result.state.to_value()
        return state

    paging_a = PagingMiddleware(max_tokens=500, boundary="fixed_2", store=InMemoryStore())
    paging_b = PagingMiddleware(max_tokens=500, boundary="fixed_2", store=InMemoryStore())
    state_a = build(paging_a, "Secret {i}: the vault code of Bay{i} is {i}37.")
    state_b = build(paging_b, "Garden {i}: the tomatoes in bed {i} need water.")
    assert paging_a.pager.recall("t", state_a, query="vault code Bay3").accessed
    other = paging_b.pager.recall("t", state_b, query="vault code Bay3")
    assert not other.accessed and "Nothing paged out matches" in other.content


def test_thread_isolation() -> None:
    """Recall in thread B of an id that exists only in thread A says no such page."""
    from langchain_core.messages import AIMessage as AI

    call = AI("", tool_calls=[{"name": "recall", "args": {"page_ids": ["p1", "p5", "c1"]}, "id": "c1"}])
    call2 = AI("", tool_calls=[{"name": "recall", "args": {"query": "beehives Zarko3 Bled3"}, "id": "c2"}])
    agent, _paging, _model = scripted_agent(
        500, boundary="fixed_2", responses=["ok"] * 20 + [call, "done", call2, "done"]
    )
    for i in range(20):
        agent.invoke({"messages": [HumanMessage(FACTS[i])]}, {"configurable": {"thread_id": "alice"}})
    state = agent.invoke({"messages": ["secrets?"]}, {"configurable": {"thread_id": "bob"}})
    state = agent.invoke({"messages": ["search?"]}, {"configurable": {"thread_id": "bob"}})
    tool_messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert "No such page or cluster in this conversation: p1, p5, c1" in tool_messages[0].content, (
        f"bob's recall of alice's ids: {tool_messages[0].content[:200]!r}"
    )
    assert not any("Lake Bled" in m.content for m in tool_messages), "bob read alice's text"
