"""Recall writes a delta of the paging state: after recalls no page vanishes and no page id is reused."""

from __future__ import annotations

from langchain_core.messages import HumanMessage

from tests.support.scenario_helpers import FACTS, agent_history, scripted_agent


def test_recall_no_stale_state() -> None:
    """Recall writes a delta: pages do not vanish and ids are not reused after recalls."""
    from langchain_core.messages import AIMessage as AI

    def recall_call(ids, cid):
        return AI("", tool_calls=[{"name": "recall", "args": {"page_ids": ids}, "id": cid}])

    responses = []
    for i in range(30):
        responses += [recall_call(["p1", "p2"], f"c{i}"), "ok"] if i % 3 == 2 else ["Noted."]
    agent, paging, _model = scripted_agent(700, boundary="fixed_2", responses=responses)
    config = {"configurable": {"thread_id": "t"}}
    for i in range(30):
        agent.invoke({"messages": [HumanMessage(FACTS[i], id=f"h{i}")]}, config)
    history = agent_history(paging, "t", agent.get_state(config).values)
    got = [m.content for m in history if isinstance(m, HumanMessage)]
    assert got == FACTS[:30], f"history lost after recalls: {len(got)} of 30 user turns"
    pages = paging.page_store.list_pages("t")
    assert len({p.id for p in pages}) == len(pages), "page ids reused"
