"""View mode: the app removing messages from the front of the history (LangGraph's "delete old
messages" pattern) is a removal, not a rewrite.

Removing the history's first message used to be taken for a rewrite (the new first message was a
paged-out one the skeleton did not know): the whole history was paged again (40 -> 82 stored
pages), every bookmark renumbered (prompt caches lost), and prompts went over budget.
"""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import PageStore, PagingMiddleware
from langmem_paging.core.tokens import TokenCounter


@pytest.mark.parametrize("removed", [1, 2, 5])
def test_removing_the_first_messages_keeps_the_pages_and_the_bookmarks(removed):
    from langmem_paging.testing import ScriptedChatModel

    model = ScriptedChatModel(
        responses=[f"Noted {i}: " + " ".join(f"n{i}x{j}" for j in range(12)) for i in range(60)]
    )
    store = InMemoryStore()
    agent = create_agent(
        model,
        middleware=[PagingMiddleware(max_tokens=376, mode="view", boundary="fixed_2")],
        store=store,
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    for i in range(30):
        agent.invoke(
            {"messages": [HumanMessage(f"Fact {i}: " + " ".join(f"w{i}x{j}" for j in range(14)))]}, config
        )
    page_store = PageStore(store)
    for k in range(3):
        pages_before = {p.id for p in page_store.list_pages("t")}
        history = agent.get_state(config).values["messages"]
        agent.update_state(config, {"messages": [RemoveMessage(id=m.id) for m in history[:removed]]})
        agent.invoke({"messages": [HumanMessage(f"more {k}", id=f"more{k}")]}, config)
        new_pages = [p for p in page_store.list_pages("t") if p.id not in pages_before]
        recent = {m.id for m in history[-4:]}
        paged_again = [m.id for p in new_pages for m in p.messages if m.id not in recent]
        assert not paged_again, f"{len(paged_again)} old messages paged again after removing {removed}"
        prompt = model.prompts[-1]
        assert sum(TokenCounter().count_message(m) for m in prompt) <= 500
        assert prompt[-1].id == f"more{k}"
