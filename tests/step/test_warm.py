"""Phase 5, `present_warm` (tiers on): the evicted pages the tier mode ranks best are shown as digests
of their key lines while the digests fit the warm room; the others stay cold (keyword bookmarks)."""

from __future__ import annotations

from langchain_core.messages import HumanMessage

from langmem_paging.core.messages import library_mark
from langmem_paging.step.evict import evict
from langmem_paging.step.warm import present_warm
from langmem_paging.strategies.tiers import UtilityScoring
from tests.support.steps import drive, long_turns, prepared

VIEW = [*long_turns(10), HumanMessage("What now?", id="q")]


def _evicted(**options):
    ctx = prepared(
        VIEW, max_tokens=600, low_water_tokens=400, boundary="fixed_2", bookmark_share=1.0, **options
    )
    drive(evict(ctx))
    assert ctx.state.shown and all(s.tier == "cold" for s in ctx.state.shown.values())
    return ctx


def test_the_best_ranked_pages_are_shown_warm_within_the_budget():
    ctx = _evicted(tiers=UtilityScoring(digest_ratio=0.5))

    drive(present_warm(ctx))

    warm = [pid for pid, s in ctx.state.shown.items() if s.tier == "warm"]
    assert warm and len(warm) < len(ctx.state.shown)  # the warm room holds some, not all
    for pid in warm:
        shown = ctx.state.shown[pid]
        digest = ctx.replace[shown.anchor]
        assert library_mark(digest) == {"bookmark": pid, "tier": "warm"}
        assert shown.tokens == ctx.options.count_message(digest) < shown.page_tokens
    assert ctx.measured_total() == ctx.total <= ctx.options.budget


def test_without_tiers_every_evicted_page_stays_cold():
    ctx = _evicted()
    replaced = dict(ctx.replace)

    drive(present_warm(ctx))

    assert ctx.replace == replaced and all(s.tier == "cold" for s in ctx.state.shown.values())
