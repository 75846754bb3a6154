"""Phase 6: the cold tier. Bookmarks the app removed leave the view (their pages stay stored and
recallable by id: `drop_removed`); old bookmarks fold into cluster bookmarks when they pass their
share; pages evicted with no bookmark of their own (smaller than it) go into the nearest cluster now.
A stand-in another message displaced (it took its id) was shown again before (`step.displaced`), so
every orphan left here is one the app removed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from langmem_paging.core.effects import ask
from langmem_paging.core.library_messages import cluster_message
from langmem_paging.core.state import ClusterEntry, PagingState
from langmem_paging.step.context import StepContext
from langmem_paging.step.io import Flow, Reserve, with_terms
from langmem_paging.strategies.clusters import ClusterOptions, FoldPlan, FoldPlanner, materialize

__all__ = ["drop_removed", "fold", "fold_to_fit"]


def drop_removed(ctx: StepContext) -> None:
    """Bookmarks the app removed from the context (a summary replaced the history, an old message was
    deleted) leave the view with what they stood for: their pages are deleted history, never folded
    into another cluster (they stay stored and recallable by id)."""
    state = ctx.state
    for page_id in ctx.orphans:
        _retire(state, page_id)
    for cluster_id in ctx.orphan_clusters:
        state.clusters.pop(cluster_id)
    ctx.orphans, ctx.orphan_clusters = [], []


def fold(ctx: StepContext, direct: Sequence[str], *, clusters: ClusterOptions | None = None) -> Flow[None]:
    """Plan the unions, reserve cluster numbers, and show the new roots where their first member was
    (`direct`: shown pages evicted with no bookmark, which a cluster must take; `clusters`: folding
    options other than the step's, to fold tighter). Without `direct` pages, a plan that would not
    make the stand-ins smaller is not made (a lone bookmark's one-page cluster can be longer)."""
    state = ctx.state
    planner = FoldPlanner(state, ctx.position, clusters or ctx.options.clusters, ctx.options.count_message)
    if not direct and not planner.past_share():
        return  # nothing to fold: no terms read
    cold = [p for p, s in state.shown.items() if s.tier == "cold"]
    yield from with_terms(state, [*cold, *direct], state.clusters)
    plan = planner.decide(direct)
    if not plan or (not direct and not planner.shrinks()):
        return
    numbers = yield from ask(Reserve("c", [n.digest for n in plan.nodes], state))
    _apply(ctx, plan, numbers)


def _apply(ctx: StepContext, plan: FoldPlan, numbers: list[int]) -> None:
    """The planned unions made (their cluster numbers reserved): the folded bookmarks and merged
    roots leave the view, each new root's cluster bookmark stands where its first member was."""
    state, position = ctx.state, ctx.position
    nodes, entries, _ = materialize(plan, numbers, max_keywords=ctx.options.clusters.max_keywords)
    consumed = {state.shown[p].anchor for p in plan.folded} | set(plan.removed_anchors)
    for page_id in plan.folded:
        _retire(state, page_id)
    for cluster_id in list(state.clusters):
        if cluster_id not in plan.roots:
            consumed.add(state.clusters.pop(cluster_id).anchor)
    _show_roots(ctx, entries, position)
    kept = {e.anchor for e in state.clusters.values()}
    for anchor in consumed - kept:
        if anchor in position:
            ctx.replace[anchor] = None
    ctx.result.nodes.extend(nodes)
    ctx.result.folded.extend(plan.folded)


def _show_roots(ctx: StepContext, entries: dict[str, ClusterEntry], position: Mapping[str, int]) -> None:
    """The new roots' cluster bookmarks, each where its first member was."""
    for cluster_id, entry in entries.items():
        message = cluster_message(cluster_id, entry.text, entry.anchor)
        entry.tokens = ctx.options.count_message(message)
        ctx.state.clusters[cluster_id] = entry
        if entry.anchor in position:
            ctx.replace[entry.anchor] = message


def fold_to_fit(ctx: StepContext) -> Flow[None]:
    """Still over budget once nothing else can go (what is left are pages no bigger than their
    bookmarks, and bookmarks): bookmarks give way, folding into clusters until they have freed the
    tokens the view is over by, before their share would make them fold."""
    over = ctx.measured_total() - ctx.options.budget
    state = ctx.state
    shown = sum(
        s.tokens for s in state.shown.values() if s.tier == "cold" and s.anchor in ctx.position
    ) + sum(c.tokens for c in state.clusters.values())
    if over <= 0 or not shown:
        return
    tighter = replace(ctx.options.clusters, bookmark_tokens=max(1, shown - over), fold_to=1.0)
    yield from fold(ctx, [], clusters=tighter)


def _retire(state: PagingState, page_id: str) -> None:
    """A shown page leaves the view's list (folded or orphaned); its access statistics stay."""
    shown = state.shown.pop(page_id)
    if shown.count:
        state.stats[page_id] = [shown.count, shown.last]
