"""The pipeline's `settle`: a page no bigger than its bookmark waited for a cluster, and folding made
one only after eviction was over; still over budget (measured) with a cluster in the view, the
resident pages are evicted again and what went straight into the cluster is folded."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from langmem_paging.step.arrival import page_large_results
from langmem_paging.step.evict import evict, unbookmarked
from langmem_paging.step.fold import drop_removed, fold
from langmem_paging.step.malformed import shrink_malformed
from langmem_paging.step.pipeline import settle
from tests.support.steps import drive, prepared

FILLER = "harbor lantern museum meadow puppy oslo glacier canyon violin pottery " * 3
HISTORY = [
    HumanMessage("Summary: violin concert velvet cobalt recipe library museum falcon quito", id="s"),
    HumanMessage(FILLER, id="h1"),
    AIMessage(FILLER, id="a1"),
    HumanMessage("puppy oslo zebra pottery marathon painting concert violin lantern cobalt saffron", id="h2"),
]


def _folded():
    """The step up to its first fold, as `paging_step` runs it."""
    ctx = prepared(HISTORY, max_tokens=60, boundary="fixed_1", policy="lru", bookmark_share=0.05)
    drive(page_large_results(ctx))
    drive(shrink_malformed(ctx))
    drive(evict(ctx))
    drop_removed(ctx)
    drive(fold(ctx, unbookmarked(ctx)))
    return ctx


def test_a_page_that_waited_for_a_cluster_goes_into_the_one_folding_made():
    ctx = _folded()
    (waiting,) = ctx.state.pages  # the summary's page: no bigger than its bookmark, it waited
    assert ctx.cluster_in_view() and ctx.measured_total() > ctx.options.budget

    drive(settle(ctx))

    assert waiting in ctx.result.evicted and waiting in ctx.result.folded and not ctx.state.pages
    assert ctx.measured_total() <= ctx.total <= ctx.options.budget


def test_settle_does_nothing_within_budget():
    ctx = prepared(HISTORY, max_tokens=1000, boundary="fixed_1")
    drive(settle(ctx))
    assert not ctx.replace and not ctx.result.evicted
