"""Phase 3, `form_pages` (with `free_runs` and `cut_pages`): the free units cut into pages by the
boundary, then formed: numbered, bookmarked, recorded as resident. Forming evicts nothing."""

from __future__ import annotations

from langchain_core.messages import HumanMessage

from langmem_paging.step.form import Draft, cut_pages, form_pages, free_runs
from tests.support.steps import drive, long_turns, prepared


def test_free_runs_are_cut_by_the_boundary_and_formed_as_resident_pages():
    view = [*long_turns(5), HumanMessage("What now?", id="q")]
    ctx = prepared(view, max_tokens=2000, boundary="fixed_3")
    total = ctx.total

    (run,) = free_runs(ctx)
    closed, tail = cut_pages(ctx, run)
    pages = drive(form_pages(ctx, [Draft(units) for units in closed]))

    assert [m.id for u in run.units for m in u.messages] == [m.id for m in view[:-1]]  # not the user's
    assert [[m.id for u in units for m in u.messages] for units in closed] == [
        ["h0", "a0", "h1"],
        ["a1", "h2", "a2"],
        ["h3", "a3", "h4"],
    ]
    assert [m.id for u in tail for m in u.messages] == ["a4"]  # open: the next message may join it
    assert [p.id for p in pages] == ["p1", "p2", "p3"] == ctx.result.formed
    assert all(p.bookmark.startswith(f"[{p.id}:") for p in pages)
    assert (
        ctx.state.pages["p2"].ids == ["a1", "h2", "a2"]
        and ctx.state.pages["p2"].tokens == pages[1].token_count
    )
    assert pages[0].messages == view[:3]
    assert not ctx.replace and ctx.total == total and not ctx.result.evicted  # formed, not evicted
