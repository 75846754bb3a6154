"""Two runs at once on one thread: one lineage is kept whole and the budget holds afterwards."""

from __future__ import annotations

import asyncio

from langchain_core.messages import HumanMessage

from tests.support.scenario_helpers import FACTS, agent_history, prompt_tokens, scripted_agent


def test_concurrent_runs() -> None:
    """Two ainvoke at once on one thread: one lineage kept whole, budget held afterwards."""
    agent, paging, model = scripted_agent(520, boundary="fixed_2")
    config = {"configurable": {"thread_id": "t"}}

    async def go():
        for i in range(6):
            await agent.ainvoke({"messages": [HumanMessage(FACTS[i], id=f"h{i}")]}, config)
        for k in range(4):
            await asyncio.gather(
                agent.ainvoke({"messages": [HumanMessage(FACTS[10 + 2 * k], id=f"a{k}")]}, config),
                agent.ainvoke({"messages": [HumanMessage(FACTS[11 + 2 * k], id=f"b{k}")]}, config),
            )
        for i in range(20, 26):
            await agent.ainvoke({"messages": [HumanMessage(FACTS[i], id=f"h{i}")]}, config)

    asyncio.run(go())
    for k in range(len(model.prompts)):
        tokens = prompt_tokens(model, paging, k=k)
        assert tokens <= 520, f"prompt {k} over budget: {tokens} > 520"
    history = agent_history(paging, "t", agent.get_state(config).values)
    ids = [m.id for m in history if isinstance(m, HumanMessage)]
    assert ids[:6] == [f"h{i}" for i in range(6)], f"user turns lost: {ids}"
    assert ids[-6:] == [f"h{i}" for i in range(20, 26)], f"user turns lost: {ids}"
    for k in range(4):
        assert {f"a{k}", f"b{k}"} & set(ids), f"both concurrent turns {k} lost: {ids}"
