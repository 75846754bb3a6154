"""The paging step, pure: the context and the branch's paging state in, the paged context out.

reconcile -> show displaced stand-ins again -> number -> protect -> page tool results on arrival ->
evict -> tiers -> drop removed bookmarks -> fold -> settle -> trim the latest tool group -> finish,
each phase a function over one `StepContext`. The step works on the *view*: the messages the
model would receive (in replace mode the state's messages; in view mode the history as the last
step left it shown). Its work is proportional to the view, which the budget bounds, never to the
history. It is a generator of requests (numbers, bookmarks, features, stored pages:
`langmem_paging.core.effects`), driven with no store by `page_messages` and with one by the engine.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from langmem_paging.step.arrival import page_large_results, trim_latest_group
from langmem_paging.step.context import StepContext, start
from langmem_paging.step.displaced import reshow_displaced
from langmem_paging.step.evict import evict, evict_resident, unbookmarked
from langmem_paging.step.finish import finish
from langmem_paging.step.fold import drop_removed, fold, fold_to_fit
from langmem_paging.step.io import Flow
from langmem_paging.step.malformed import shrink_malformed
from langmem_paging.step.options import StepOptions
from langmem_paging.step.protect import protect
from langmem_paging.step.reconcile import number_new_messages, reconcile
from langmem_paging.step.result import PagingResult, PagingValue
from langmem_paging.step.warm import present_warm

__all__ = ["paging_step"]


def paging_step(
    view: Sequence[BaseMessage], state_value: PagingValue, options: StepOptions
) -> Flow[PagingResult]:
    """Page `view` under `options.budget`; yields requests (see `langmem_paging.core.effects`).

    Neither `view` nor `state_value` is mutated.
    """
    ctx = start(view, state_value, options)
    reconcile(ctx)
    yield from reshow_displaced(ctx)
    number_new_messages(ctx)
    protect(ctx)
    yield from page_large_results(ctx)
    yield from shrink_malformed(ctx)
    if ctx.total > options.budget:
        yield from evict(ctx)
    yield from present_warm(ctx)
    drop_removed(ctx)
    yield from fold(ctx, unbookmarked(ctx))
    yield from settle(ctx)
    yield from fold_to_fit(ctx)
    ctx.total = ctx.measured_total()
    yield from settle(ctx)
    yield from trim_latest_group(ctx)
    return finish(ctx)


def settle(ctx: StepContext) -> Flow[None]:
    """A page smaller than its bookmark waited for a cluster to go into, and folding may have made
    one only now: still over budget (measured, not the running estimate) with a cluster in the
    view, the resident pages are evicted again, and what went straight in is folded."""
    if not (ctx.total > ctx.options.budget and ctx.state.pages and ctx.cluster_in_view()):
        return
    ctx.total = ctx.measured_total()
    if ctx.total <= ctx.options.budget:
        return
    before = set(ctx.result.evicted)
    yield from evict_resident(ctx, ctx.policy_context())
    if not before.issuperset(ctx.result.evicted):
        yield from fold(ctx, [p for p in unbookmarked(ctx) if p not in before])
