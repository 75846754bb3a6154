"""Phase 3b, `shrink_malformed`: over budget, an earlier turn's malformed tool call whose error result
has no id yet (no update could remove its unit) goes behind a stub, its raw arguments in a page."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langmem_paging.core.messages import library_mark
from langmem_paging.step.malformed import shrink_malformed
from tests.support.steps import drive, long_turns, prepared

RAW = '{"q": "' + " ".join(f"avalanche{k} cornice" for k in range(300))  # cut at the output limit


def _view():
    bad = AIMessage(
        "",
        invalid_tool_calls=[
            {
                "name": "search",
                "args": RAW,
                "id": "bad1",
                "error": "Invalid JSON",
                "type": "invalid_tool_call",
            }
        ],
        id="bad",
    )
    error = ToolMessage(
        "Error: invalid JSON in the arguments", tool_call_id="bad1", status="error"
    )  # no id yet
    return bad, [
        *long_turns(1),
        HumanMessage("Search please.", id="q0"),
        bad,
        error,
        AIMessage("Sorry, let me answer instead.", id="sorry"),
        *long_turns(2, start=1),
        HumanMessage("And now?", id="q"),
    ]


def test_an_earlier_malformed_call_kept_by_its_idless_result_goes_behind_a_stub():
    bad, view = _view()
    ctx = prepared(view, max_tokens=700)
    unit = next(k for k, u in enumerate(ctx.units) if u.messages[0] is bad)
    assert unit in ctx.protected and ctx.total > ctx.options.budget  # kept only by the result's missing id
    before = ctx.total

    drive(shrink_malformed(ctx))

    stub = ctx.replace["bad"]
    assert isinstance(stub, AIMessage) and stub.id == "bad" and RAW not in str(stub)
    assert [c["id"] for c in stub.invalid_tool_calls + stub.tool_calls] == [
        "bad1"
    ]  # its result still answers it
    assert library_mark(stub).get("paged_result") == "p1" and ctx.result.evicted == ["p1"]
    assert ctx.result.pages[0].messages == [bad] and "p1" not in ctx.state.pages
    assert ctx.total < before and set(ctx.replace) == {"bad"}


def test_a_call_within_budget_is_left_alone():
    _, view = _view()
    ctx = prepared(view, max_tokens=5000)

    drive(shrink_malformed(ctx))

    assert not ctx.replace and not ctx.result.pages
