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
