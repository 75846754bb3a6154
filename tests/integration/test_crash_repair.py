"""A tool call left unanswered by a crash is answered, so the thread recovers.

A run that stops between the model's tool call and the tools' results (a crash between the tool
node's pending writes and the next checkpoint) leaves an AI message whose call has no result;
when the app sends a new message, every later prompt held that invalid pair (providers answer 400:
229 of 395 prompts of one thread), because paging keeps unanswered calls. The step now answers the
call with an error result, as `create_agent` answers a malformed call.
"""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingMiddleware
from langmem_paging.ops import load_branches, verify_thread
from langmem_paging.storage.page_store import PageStore
from langmem_paging.testing import ScriptedChatModel
from langmem_paging.testing.conformance import valid_chat


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}."


@pytest.mark.parametrize("mode", ["replace", "view"])
def test_a_call_the_tools_never_answered_gets_an_error_result_and_the_thread_recovers(mode):
    model = ScriptedChatModel(responses=["Noted."] * 20)
    paging = PagingMiddleware(max_tokens=900, boundary="fixed_2", mode=mode)
    agent = create_agent(
        model, tools=[weather], middleware=[paging], store=InMemoryStore(), checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t"}}
    for i in range(3):
        agent.invoke({"messages": [f"Fact {i}: the lake is calm today."]}, config)
    # the model asked for the weather, and the process died before the tools node wrote its result
    agent.update_state(
        config,
        {
            "messages": [
                AIMessage(
                    "",
                    id="crashed",
                    tool_calls=[{"name": "weather", "args": {"city": "Bled"}, "id": "call-lost"}],
                )
            ]
        },
        as_node="model",
    )
    for i in range(4):
        agent.invoke({"messages": [HumanMessage(f"Are you there? {i}")]}, config)
    for prompt in model.prompts[3:]:
        valid_chat(prompt)
    last = model.prompts[-1]
    at = next((k for k, m in enumerate(last) if m.id == "crashed"), None)
    if at is not None:  # still in the context: its answer follows it
        assert isinstance(last[at + 1], ToolMessage) and last[at + 1].tool_call_id == "call-lost"


@pytest.mark.parametrize("mode", ["replace", "view"])
def test_the_answer_of_the_call_that_repairs_is_kept(mode):
    """The turn whose step answers the lost call (and so rewrites the message list) keeps the model's
    answer. Before: in replace mode the step's rewrite (``REMOVE_ALL_MESSAGES`` and the view) came after
    the answer in `create_agent`'s updates and removed it: the answer never reached the checkpoint."""
    model = ScriptedChatModel(responses=[f"Answer {i}." for i in range(20)])
    paging = PagingMiddleware(max_tokens=900, boundary="fixed_2", mode=mode)
    agent = create_agent(
        model, tools=[weather], middleware=[paging], store=InMemoryStore(), checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": ["Fact: the lake is calm today."]}, config)
    call = AIMessage("", id="crashed", tool_calls=[{"name": "weather", "args": {"city": "Bled"}, "id": "c1"}])
    agent.update_state(config, {"messages": [call]}, as_node="model")
    for i in range(3):
        agent.invoke({"messages": [HumanMessage(f"Are you there? {i}", id=f"q{i}")]}, config)
    messages = agent.get_state(config).values["messages"]
    answers = [m.content for m in messages if m.type == "ai" and m.content]
    assert answers == ["Answer 0.", "Answer 1.", "Answer 2.", "Answer 3."]
    assert [m.id for m in messages if m.type == "human"][-3:] == ["q0", "q1", "q2"]
    for prompt in model.prompts[1:]:
        valid_chat(prompt)
    if mode == "replace":  # the state holds the repair too (view mode keeps the history as it came)
        valid_chat(messages)


def _verified(agent, store, thread="t") -> list[str]:
    branches = load_branches(agent.checkpointer, thread)
    result = verify_thread(PageStore(store), thread, branches.latest, others=branches.others)
    return [f"{issue.code}: {issue.detail}" for issue in [*result.issues, *result.warnings]]


@pytest.mark.parametrize("retried", [False, True])
def test_a_run_killed_in_its_tools_then_retried_or_followed_verifies_and_sends_valid_chats(retried):
    """The plain app's deployment test under worker kills (tests/integration/test_deploy.py[app-2]): a
    worker dies in the tools after the model's call; the client retries the turn (its message sent
    again under its id: `add_messages` replaces it in place, before the call) or another client's turn
    comes first. Before: the retried turn sent the model the call with no result (the step took it for
    one in flight), and the next turn's repair, put right after the call, made `verify` report the
    history out of the order it arrived in."""
    store = InMemoryStore()
    model = ScriptedChatModel(
        responses=[
            "Noted.",
            AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Bled"}, "id": "c1"}]),
            *[f"Answer {i}." for i in range(6)],
        ]
    )
    paging = PagingMiddleware(max_tokens=900, boundary="fixed_2")
    agent = create_agent(
        model, tools=[weather], middleware=[paging], store=store, checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("Fact: the lake is calm today.", id="h0")]}, config)
    ask = HumanMessage("What is the weather in Bled?", id="ask")
    agent.invoke({"messages": [ask]}, config, interrupt_before=["tools"])  # the worker dies in the tools
    assert agent.get_state(config).next == ("tools",)
    if retried:
        agent.invoke({"messages": [ask]}, config)
    agent.invoke({"messages": [HumanMessage("Still there?", id="later")]}, config)

    for prompt in model.prompts:
        valid_chat(prompt)
    assert _verified(agent, store) == []
    messages = agent.get_state(config).values["messages"]
    assert [m.content for m in messages if m.type == "ai" and m.content] == (
        ["Noted.", "Answer 0.", "Answer 1."] if retried else ["Noted.", "Answer 0."]
    )
