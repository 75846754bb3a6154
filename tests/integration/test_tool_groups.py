"""Tool calls through an agent: malformed calls and long tool loops keep every prompt a valid chat
within budget."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.support.scenario_helpers import FACTS, agent_history, malformed_call, prompt_tokens, scripted_agent
from tools.fuzzing.graph import scenario_tools
from tools.fuzzing.oracles import chat_problems
from tools.fuzzing.vocabulary import VOCAB


@pytest.mark.parametrize("mode", ["replace", "view"])
def test_invalid_tool_calls_grouped(mode: str) -> None:
    """AI with invalid_tool_calls and its error ToolMessage are never split by a page cut."""
    responses = []
    for i in range(30):
        responses += [malformed_call(f"bad{i}"), f"Sorry, answer {i}."] if i % 2 else [f"Answer {i}."]
    agent, _paging, model = scripted_agent(520, mode=mode, boundary="fixed_1", responses=responses)
    config = {"configurable": {"thread_id": "t"}}
    for i in range(20):
        agent.invoke({"messages": [HumanMessage(FACTS[i])]}, config)
    for k, prompt in enumerate(model.prompts):
        problems = chat_problems(prompt)
        assert not problems, f"prompt {k}: {problems[0][0]}"


@pytest.mark.parametrize("mode", ["replace", "view"])
def test_long_tool_loop(mode: str) -> None:
    """One user turn with 50 tool calls stays within budget and valid."""
    tools = scenario_tools()
    responses = (
        ["ok"]
        + [
            AIMessage(
                "",
                tool_calls=[{"name": "lookup", "args": {"q": f"item {k} " + VOCAB[k % 30]}, "id": f"l{k}"}],
            )
            for k in range(50)
        ]
        + ["done"]
    )
    agent, paging, model = scripted_agent(
        800, mode=mode, boundary="fixed_3", responses=responses, tools=tools
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("hello")]}, config)
    agent.invoke({"messages": [HumanMessage("look up fifty things")]}, config)
    for k, prompt in enumerate(model.prompts):
        problems = chat_problems(prompt)
        assert not problems, f"prompt {k}: {problems[0][0]}"
        tokens = prompt_tokens(model, paging, tools, k=k)
        assert tokens <= 800, f"prompt {k} over budget: {tokens}"
    history = agent_history(paging, "t", agent.get_state(config).values)
    assert sum(isinstance(m, ToolMessage) for m in history) == 50, "tool results lost"
