"""The graph `langgraph.json` serves, on its scripted echo model: bookmarks come from the
conversation, not from the model's note about what it is (which sits in each reply's metadata)."""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging.core.messages import is_bookmark


def test_demo_graph_bookmarks_carry_no_hint_text(monkeypatch):
    monkeypatch.delenv("LANGMEM_PAGING_MODEL", raising=False)
    import graphs.demo_graph as demo

    agent = demo.graph.builder.compile(checkpointer=InMemorySaver(), store=InMemoryStore())
    config = {"configurable": {"thread_id": "demo"}}
    for i in range(60):
        state = agent.invoke(
            {
                "messages": [
                    f"Day {i}: my neighbour Zarko{i} keeps {i + 3} beehives near Lake "
                    "Bled and sells honey at the market."
                ]
            },
            config,
        )
    bookmarks = [m.content for m in state["messages"] if is_bookmark(m)]
    assert len(bookmarks) >= 3
    hint_words = {"scripted", "LANGMEM_PAGING_MODEL", "openai", "gpt-4o-mini", "real"}
    assert not [b for b in bookmarks if any(w.lower() in b.lower() for w in hint_words)], bookmarks
    assert all("Zarko" in b for b in bookmarks)
    replies = [m for m in state["messages"] if m.type == "ai"]
    assert replies and "LANGMEM_PAGING_MODEL" in replies[-1].response_metadata["hint"]
