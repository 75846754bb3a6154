"""Before paging, `repair_unanswered` (run by `start`): a tool call left unanswered while the
conversation went on gets an error result right after it, and the step's updates rewrite the list
(``add_messages`` can only append); a call still in flight is left alone."""

from __future__ import annotations

from dataclasses import replace

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langmem_paging.step.context import start
from langmem_paging.step.finish import finish
from langmem_paging.step.repair import REPAIR_TEXT
from langmem_paging.testing.conformance import valid_chat
from tests.support.steps import long_turns, step_context

CALL = AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": "c1"}], id="t1")


def test_a_call_the_conversation_went_past_is_answered_and_the_list_rewritten():
    view = [*long_turns(1), HumanMessage("Look it up.", id="q0"), CALL, HumanMessage("Hello?", id="q1")]

    ctx = step_context(view, max_tokens=1000)

    assert [m.id for m in ctx.messages] == ["h0", "a0", "q0", "t1", "repair-c1", "q1"]
    repair = ctx.messages[4]
    assert isinstance(repair, ToolMessage) and repair.tool_call_id == "c1" and repair.name == "lookup"
    assert repair.status == "error" and repair.content == REPAIR_TEXT
    assert ctx.rewritten and ctx.newest_user == 5
    result = finish(ctx)
    assert result.updates == [RemoveMessage(id=REMOVE_ALL_MESSAGES), *ctx.messages]
    assert view[-1].id == "q1" and len(view) == 5  # the input is not mutated


def test_a_call_still_in_flight_is_left_alone():
    view = [*long_turns(1), HumanMessage("Look it up.", id="q0"), CALL]

    ctx = step_context(view, max_tokens=1000)

    assert ctx.messages == view and not ctx.rewritten
    assert finish(ctx).updates == []


def test_right_before_a_model_call_a_call_with_nothing_after_it_is_answered_too():
    """A run killed in its tools whose input was sent again (replaced in place, before the call)
    reaches the model with the call last: the `Pager`'s step (`before_model`) answers it. Before: left
    alone as if in flight, and the model was sent a call with no result (the plain app's deployment
    test, a retried turn)."""
    view = [*long_turns(1), HumanMessage("Look it up.", id="q0"), CALL]
    options = replace(step_context([], max_tokens=1000).options, before_model=True)

    ctx = start(view, None, options)

    assert [m.id for m in ctx.messages][-3:] == ["q0", "t1", "repair-c1"] and ctx.rewritten
    valid_chat(ctx.messages)
