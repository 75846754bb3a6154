"""Phase 7, `finish`: the step's replacements turned into the new view and the `add_messages`
updates that make it, the totals measured and recorded in the state, and over budget reported
(warned once per thread)."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, RemoveMessage

from langmem_paging.core.library_messages import bookmark_message
from langmem_paging.step.finish import finish
from tests.support.steps import long_turns, prepared

VIEW = [*long_turns(3), HumanMessage("What now?", id="q")]


def test_finish_builds_the_view_and_its_updates_from_the_replacements():
    ctx = prepared(VIEW, max_tokens=2000)
    bookmark = bookmark_message("p1", "[p1:harbor0,lantern0]", "h0")
    ctx.replace.update({"h0": bookmark, "a0": None})

    result = finish(ctx)

    assert [m.id for m in result.view] == ["h0", "h1", "a1", "h2", "a2", "q"] and result.view[0] is bookmark
    assert result.updates == [bookmark, RemoveMessage(id="a0")]
    assert result.tokens == sum(ctx.options.count_message(m) for m in result.view) == ctx.state.tokens
    assert result.tokens < result.tokens_before
    assert ctx.state.budget == ctx.options.budget and not result.over_budget


def test_finish_reports_over_budget_and_warns_once_per_thread():
    first = finish(prepared(VIEW, max_tokens=100))
    assert first.over_budget and first.first_over_budget and first.state.warned
    assert first.updates == [] and first.view == VIEW  # nothing replaced: nothing to update

    again = finish(prepared(VIEW, max_tokens=100, state=first.state.to_value()))

    assert again.over_budget and not again.first_over_budget
