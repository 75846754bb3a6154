"""Phase 4, `evict`: over budget, pages are cut and evicted, in the policy's order, until the view is
under the low-water mark; each evicted page's bookmark takes its first message's place."""

from __future__ import annotations

from langchain_core.messages import HumanMessage

from langmem_paging.core.messages import library_mark
from langmem_paging.step.evict import evict
from langmem_paging.strategies.policies import FIFOPolicy
from tests.support.steps import drive, long_turns, prepared

VIEW = [*long_turns(10), HumanMessage("What now?", id="q")]


class NewestFirst(FIFOPolicy):
    """The opposite of FIFO: the page nearest the end goes first."""

    def victim(self, candidates, context):
        return max(candidates, key=lambda c: c.position)


def _evict(policy):
    ctx = prepared(
        VIEW, max_tokens=600, low_water_tokens=450, boundary="fixed_2", policy=policy, bookmark_share=1.0
    )
    assert ctx.total > ctx.options.budget
    drive(evict(ctx))
    return ctx


def test_evict_pages_out_the_oldest_first_under_fifo_until_under_the_low_water_mark():
    ctx = _evict("fifo")

    assert ctx.total <= ctx.options.low_water < ctx.total + ctx.counts[0]  # stops once under the mark
    evicted = ctx.result.evicted
    assert evicted == [f"p{n}" for n in range(1, len(evicted) + 1)] and evicted
    for n, page_id in enumerate(evicted):
        bookmark = ctx.replace[f"h{n}"]
        assert library_mark(bookmark) == {"bookmark": page_id} and ctx.replace[f"a{n}"] is None
        assert page_id in ctx.state.shown and page_id not in ctx.state.pages
    assert "q" not in ctx.replace  # the newest user message is protected
    assert ctx.measured_total() == ctx.total


def test_evict_follows_the_policy():
    fifo, lifo = _evict("fifo"), _evict(NewestFirst())
    assert fifo.result.evicted != lifo.result.evicted
    assert max(int(p[1:]) for p in lifo.result.evicted) > max(int(p[1:]) for p in fifo.result.evicted)
