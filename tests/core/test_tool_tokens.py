"""Tool schemas are counted as OpenAI bills them, and the recall tool's schema stays small.

The recorded request: the OpenAI cookbook, "How to count tokens with tiktoken", section 7
("Counting tokens for chat completions with tool calls",
https://github.com/openai/openai-cookbook/blob/main/examples/How_to_count_tokens_with_tiktoken.ipynb),
sends one system and one user message with the tool ``get_current_weather`` below and prints the
``usage.prompt_tokens`` the API returned: 105 for gpt-3.5-turbo-0125 and gpt-4-0613 (cl100k_base),
101 for gpt-4o-2024-08-06 and gpt-4o-mini-2024-07-18 (o200k_base). No OpenAI endpoint is reachable
here, so those recorded figures are the fixture. The messages' share comes from the same
cookbook's message rule (3 tokens per message, its role and content, 3 for the reply primer; the
cookbook shows it equal to the API's count for requests without tools); the rest is the tools'.
"""

from __future__ import annotations

import asyncio
from typing import Literal

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from pydantic import BaseModel, Field

from langmem_paging import PagingMiddleware, TokenCounter
from langmem_paging.testing import ScriptedChatModel

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"},
                "unit": {
                    "type": "string",
                    "description": "The unit of temperature to return",
                    "enum": ["celsius", "fahrenheit"],
                },
            },
            "required": ["location"],
        },
    },
}
MESSAGES = [
    ("system", "You are a helpful assistant that can answer to questions about the weather."),
    ("user", "What's the weather like in San Francisco?"),
]
RECORDED_PROMPT_TOKENS = {"cl100k_base": 105, "o200k_base": 101}
"""``usage.prompt_tokens`` OpenAI reported for MESSAGES with the tool WEATHER (the cookbook's run)."""


class _Weather(BaseModel):
    location: str = Field(description="The city and state, e.g. San Francisco, CA")
    unit: Literal["celsius", "fahrenheit"] = Field("celsius", description="The unit of temperature to return")


def _messages_tokens(counter: TokenCounter) -> int:
    """The cookbook's message rule, for the messages' share of the recorded count."""
    return sum(3 + counter.count_text(role) + counter.count_text(text) for role, text in MESSAGES) + 3


@pytest.mark.parametrize("encoding", sorted(RECORDED_PROMPT_TOKENS))
def test_tools_count_as_the_recorded_usage_of_a_request_with_tools(encoding):
    counter = TokenCounter(encoding=encoding)
    assert _messages_tokens(counter) + counter.count_tools([WEATHER]) == RECORDED_PROMPT_TOKENS[encoding]
    as_langchain_tool = StructuredTool.from_function(
        func=lambda location, unit="celsius": "sunny",
        name="get_current_weather",
        description="Get the current weather in a given location",
        args_schema=_Weather,
    )
    assert counter.count_tools([as_langchain_tool]) == counter.count_tools([WEATHER])


def test_the_request_pays_the_tools_end_once_and_each_function_its_own_start():
    counter = TokenCounter(encoding="o200k_base")
    one, two = counter.count_tools([WEATHER]), counter.count_tools([WEATHER, WEATHER])
    assert two - one == one - 12  # a second function pays its schema, not the request's 12 again
    assert counter.count_tools([]) == 0


def _agent():
    facts = [f"Note {i}: my cousin Vesna{i} keeps {i + 3} beehives in Kranj{i}." for i in range(16)]
    call = AIMessage(
        "",
        id="call",
        tool_calls=[
            {"name": "recall", "args": {"page_ids": ["p1"], "query": None, "part": None}, "id": "c1"}
        ],
    )
    model = ScriptedChatModel(responses=["Noted."] * len(facts) + [call, "Done."])
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=600, boundary="fixed_4", policy="fifo", store=store)
    agent = create_agent(model, tools=[], middleware=[paging], checkpointer=InMemorySaver(), store=store)
    return agent, paging, facts


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_the_recall_schema_costs_at_most_120_tokens_and_says_what_each_argument_takes(encoding):
    _, paging, _ = _agent()
    tool = paging.recall_tool
    assert TokenCounter(encoding=encoding).count_tools([tool]) <= 120  # it was 240 as a JSON dump
    for needed in ("page_ids", "[p3:", "[c2:", "query", "excerpts"):
        assert needed in tool.description
    assert set(tool.tool_call_schema.model_json_schema()["properties"]) == {"page_ids", "query", "part"}


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_recall_takes_null_arguments_the_schema_leaves_out(use_async):
    """The schema's types leave ``null`` out (fewer tokens); a model that sends null still gets the page."""
    agent, paging, facts = _agent()
    config = {"configurable": {"thread_id": "nulls"}}
    for fact in facts:
        agent.invoke({"messages": [fact]}, config)
    question = {"messages": ["What did my notes say about the beehives?"]}
    state = asyncio.run(agent.ainvoke(question, config)) if use_async else agent.invoke(question, config)
    result = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    page = paging.page_store.get("nulls", "p1")
    assert page is not None and result.status == "success"
    assert str(page.messages[0].content)[:30] in str(result.content)
