"""Phase 3a, `page_large_results` and `trim_latest_group`: tool results paged as they arrive, each
behind a stub with the same message and call id (the stub is the page's bookmark: the page is
evicted as it forms)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langmem_paging.core.messages import library_mark
from langmem_paging.step.arrival import page_large_results, trim_latest_group
from tests.support.steps import drive, long_turns, prepared


def _call(call_id: str, message_id: str) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"name": "lookup", "args": {"q": call_id}, "id": call_id}], id=message_id
    )


def _result(call_id: str, words: int) -> ToolMessage:
    text = " ".join(f"glacier{k} meltwater" for k in range(words // 2))
    return ToolMessage(text, tool_call_id=call_id, name="lookup", id=f"r-{call_id}")


def _assert_stubbed(ctx, result: ToolMessage, page_id: str) -> None:
    stub = ctx.replace[result.id]
    assert isinstance(stub, ToolMessage) and stub.tool_call_id == result.tool_call_id
    assert library_mark(stub).get("paged_result") == page_id and "lookup" in stub.content
    assert page_id in ctx.result.evicted and page_id not in ctx.state.pages  # the stub is its bookmark
    assert next(p for p in ctx.result.pages if p.id == page_id).messages == [result]


def test_a_result_over_the_large_share_is_paged_on_arrival_and_a_small_one_stays():
    small, large = _result("c1", 20), _result("c2", 600)
    view = [
        *long_turns(2),
        HumanMessage("Look it up.", id="q"),
        _call("c1", "t1"),
        small,
        _call("c2", "t2"),
        large,
    ]
    ctx = prepared(view, max_tokens=4000, large_result_share=0.1)
    before = ctx.total

    drive(page_large_results(ctx))

    assert set(ctx.replace) == {large.id}
    _assert_stubbed(ctx, large, "p1")
    assert ctx.total == before - ctx.counts[view.index(large)] + ctx.options.count_message(
        ctx.replace[large.id]
    )


def test_the_latest_groups_largest_results_are_stubbed_until_the_view_fits():
    results = [_result("c1", 100), _result("c2", 300), _result("c3", 60)]
    call = AIMessage(
        "",
        tool_calls=[{"name": "lookup", "args": {"q": r.tool_call_id}, "id": r.tool_call_id} for r in results],
        id="t",
    )
    view = [*long_turns(1), HumanMessage("Look three things up.", id="q"), call, *results]
    ctx = prepared(view, max_tokens=700, large_result_share=None)
    assert ctx.measured_total() > ctx.options.budget

    drive(trim_latest_group(ctx))

    assert set(ctx.replace) == {"r-c2"}  # the largest was enough
    _assert_stubbed(ctx, results[1], "p1")
    assert ctx.measured_total() <= ctx.options.budget
