"""An agent's thread rewritten by the app (`RemoveMessage`, ``REMOVE_ALL_MESSAGES``, create_agent's
repair of a malformed call) goes on, and its rebuilt history keeps the state's order."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingMiddleware, PagingState
from langmem_paging.testing import ScriptedChatModel
from tests.support.harness import assert_valid_chat
from tests.support.scenario_helpers import FACTS, agent_history, malformed_call, scripted_agent
from tools.fuzzing.graph import scenario_tools


def test_remove_all_messages_mid_thread_then_the_thread_goes_on():
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=500, boundary="fixed_4", store=store)
    model = ScriptedChatModel(responses=["Noted."] * 40)
    agent = create_agent(model, middleware=[paging], store=store, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "wipe"}}
    for i in range(20):
        agent.invoke({"messages": [f"Fact {i}: the tide at Bay{i} turns at {i} pm."]}, config)
    agent.update_state(
        config,
        {
            "messages": [
                RemoveMessage(id=REMOVE_ALL_MESSAGES),
                HumanMessage("Summary: twenty tide facts so far."),
            ]
        },
    )
    for i in range(20, 30):
        state = agent.invoke({"messages": [f"Fact {i}: the tide at Bay{i} turns at {i} pm."]}, config)
    assert state["messages"][-1].content == "Noted."
    for prompt in model.prompts[-10:]:
        assert_valid_chat(prompt)
    assert paging.page_store.get("wipe", "p1") is not None  # the store keeps what was paged


def test_remove_in_resident_page() -> None:
    """RemoveMessage of a message in a formed-but-resident page, then REMOVE_ALL, never bricks the thread."""
    agent, paging, _model = scripted_agent(600, boundary="fixed_4")
    config = {"configurable": {"thread_id": "t"}}
    for i in range(10):
        agent.invoke({"messages": [HumanMessage(FACTS[i], id=f"h{i}")]}, config)
    value = PagingState.from_value(agent.get_state(config).values.get("paging"))
    resident = [i for page in value.pages.values() for i in page.ids]
    target = resident[0] if resident else "h9"
    agent.invoke({"messages": [RemoveMessage(id=target), HumanMessage("next", id="n1")]}, config)
    summary = [
        RemoveMessage(id=REMOVE_ALL_MESSAGES),
        HumanMessage("summary", id="s"),
        HumanMessage("after", id="n2"),
    ]
    agent.invoke({"messages": summary}, config)
    for i in range(10, 16):
        agent.invoke({"messages": [HumanMessage(FACTS[i], id=f"h{i}")]}, config)
    history = agent_history(paging, "t", agent.get_state(config).values)
    want = ["summary", "after", *FACTS[10:16]]
    got = [m.content for m in history if isinstance(m, HumanMessage)]
    assert got == want, f"history after REMOVE_ALL: {got[:4]}... expected {want[:4]}..."


def test_rebuild_keeps_repaired_tool_call_order() -> None:
    """create_agent repairs a malformed tool call by inserting an error ToolMessage (REMOVE_ALL_MESSAGES and
    the list again); the rebuilt history keeps the state's order."""
    tools = scenario_tools()
    bad = malformed_call("bad1", tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": "ok1"}])
    agent, paging, _model = scripted_agent(
        3000, boundary="fixed_2", responses=["ok", bad, "done", "ok"], tools=tools
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("hello", id="h1")]}, config)
    agent.invoke({"messages": [HumanMessage("look it up", id="h2")]}, config)
    agent.invoke({"messages": [HumanMessage("thanks", id="h3")]}, config)
    values = agent.get_state(config).values
    rebuilt = agent_history(paging, "t", values)
    assert rebuilt == values["messages"], (
        f"{[(m.type, m.content[:12]) for m in rebuilt if m.type == 'tool']} != "
        f"{[(m.type, m.content[:12]) for m in values['messages'] if m.type == 'tool']}"
    )
