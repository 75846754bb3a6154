"""Phase 2, `protect`: the view cut into units, and exactly the units nothing may evict marked:
system and pinned messages, the newest user message, the turn's latest tool group and what
follows it, unanswered calls, and (replace mode) messages without an id."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langmem_paging.core.messages import METADATA_KEY
from langmem_paging.step.protect import protect
from langmem_paging.step.reconcile import number_new_messages, reconcile
from tests.support.steps import long_turns, step_context


def _call(call_id: str, message_id: str) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": "lookup", "args": {"q": call_id}, "id": call_id}], id=message_id
    )


def _protected_ids(ctx) -> set[str]:
    return {m.id for k in ctx.protected for m in ctx.units[k].messages if m.id}


def test_protect_marks_exactly_what_nothing_may_evict():
    view = [
        SystemMessage("You are helpful.", id="sys"),
        *long_turns(2),
        HumanMessage("Remember this.", id="pin", additional_kwargs={METADATA_KEY: {"pinned": True}}),
        AIMessage("Pinned, noted.", id="pin-ok"),
        *long_turns(2, start=2),
        HumanMessage("Look two things up.", id="q"),
        _call("c1", "t1"),
        ToolMessage("first result", tool_call_id="c1", id="r1"),
        _call("c2", "t2"),
        ToolMessage("second result", tool_call_id="c2", id="r2"),
    ]
    ctx = step_context(view, max_tokens=1000)
    reconcile(ctx)
    number_new_messages(ctx)

    protect(ctx)

    assert [len(u.messages) for u in ctx.units].count(2) == 2  # each call with its result is one unit
    assert ctx.latest_group is not None and ctx.units[ctx.latest_group].messages[0].id == "t2"
    assert _protected_ids(ctx) == {"sys", "pin", "q", "t2", "r2"}  # t1's group is this turn's, not the latest
    assert set(ctx.calls) == {"c1", "c2"}


def test_protect_keeps_unanswered_calls_and_messages_without_an_id():
    view = [
        *long_turns(2),
        AIMessage("An old answer with no id."),
        *long_turns(2, start=2),
        HumanMessage("And now?", id="q"),
        _call("c9", "t9"),  # in flight: its result has not come yet
    ]
    ctx = step_context(view, max_tokens=1000)
    reconcile(ctx)
    number_new_messages(ctx)

    protect(ctx)

    without_id = next(k for k, u in enumerate(ctx.units) if not u.messages[0].id)
    assert without_id in ctx.protected  # no update could remove it (replace mode)
    assert _protected_ids(ctx) == {"q", "t9"}
    assert not any(k in ctx.protected for k, u in enumerate(ctx.units) if u.messages[0].id in {"h0", "a3"})
