"""A large tool result is replaced by a stub naming the tool and its arguments, never by a longer one."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langmem_paging import page_messages
from tests.support.harness import COUNTER
from tests.support.scenario_helpers import prompt_tokens, scripted_agent
from tools.fuzzing.graph import scenario_tools


def _lookup_turn():
    """A turn whose tool result is just over large_result_share of a 60-token budget: its stub (the
    tool, its arguments, the size) would be longer than the result."""
    call = {"name": "lookup", "args": {"q": "bicycle saffron recipe cobalt oslo orchard"}, "id": "c1"}
    result_text = (
        "orchard lake camping garden sunrise copper cobalt festival orchard mountain bicycle garden "
        "tundra adoption violin puppy quito lake meadow harbor glacier canyon tundra saffron cobalt"
    )
    return [
        HumanMessage("look it up", id="h1"),
        AIMessage("", tool_calls=[call], id="t1"),
        ToolMessage(result_text, tool_call_id="c1", name="lookup", id="r1"),
    ], result_text


def test_a_tool_result_just_over_the_large_share_is_not_replaced_by_a_longer_stub():
    """The stub names the tool, its arguments and the size: for a result just over
    large_result_share it was longer than the result, and the context grew."""
    history, result_text = _lookup_turn()
    result = page_messages(history, max_tokens=60, text_counter=COUNTER)
    assert result.tokens <= result.tokens_before
    assert result.view[-1].content == result_text


def test_a_tool_result_left_unpaged_is_not_stubbed_a_turn_later_without_its_args():
    """A result whose stub would be longer stays as it is; a turn later its call was out of the
    step's sight, so the stub lost the args, came out shorter, and replaced the result then."""
    history, result_text = _lookup_turn()
    first = page_messages(history, max_tokens=60, text_counter=COUNTER)
    later = page_messages(
        [*first.view, AIMessage("Found it.", id="a1"), HumanMessage("thanks", id="h2")],
        max_tokens=60,
        state=first.state.to_value(),
        text_counter=COUNTER,
    )
    stub = next((m for m in later.view if m.id == "r1"), None)
    assert stub is None or stub.content == result_text or "bicycle saffron" in stub.content


def test_large_tool_result_stub(kind: str = "middleware") -> None:
    """A 5,000-token tool result is paged on arrival: the model sees a stub naming the tool and its args."""
    tools = scenario_tools()
    call = AIMessage(
        "", tool_calls=[{"name": "big_report", "args": {"topic": "glacier", "tokens": 5000}, "id": "big1"}]
    )
    agent, paging, model = scripted_agent(
        1600, boundary="fixed_2", responses=["ok", call, "done", "ok"], tools=tools
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("hello")]}, config)
    agent.invoke({"messages": [HumanMessage("report on glaciers please")]}, config)
    prompt = model.prompts[2]
    results = [m for m in prompt if isinstance(m, ToolMessage)]
    assert results and "big_report" in results[0].content and "glacier" in results[0].content, (
        f"stub: {results[0].content[:200] if results else None!r}"
    )
    assert prompt_tokens(model, paging, tools, k=2) <= 1600, "over budget"
