"""Phase 4: over budget, pages are cut from the free units and evicted until the context is back
under its target. The base does the accounting; the policy answers one question: which candidate
goes next (a resident page, or an earlier recall result, which shrinks back to a reference).

An evicted page is replaced, at its place, by its bookmark; a page no bigger than its bookmark
goes straight into the nearest cluster when the step folds (a bookmark must never make the
context bigger), or waits, while no cluster exists, until such pages together outweigh the
cluster bookmark the first of them starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage, ToolMessage

from langmem_paging.core.effects import ask
from langmem_paging.core.library_messages import (
    bookmark_message,
    cluster_bookmark_tokens,
    is_result_stub,
    is_shrunk_copy,
    shrink_recall_copy,
    stored_form,
)
from langmem_paging.core.messages import library_mark, recall_copy_pages
from langmem_paging.core.records import Page, messages_digest, page_number
from langmem_paging.core.state import ResidentPage, ShownPage
from langmem_paging.step.context import StepContext
from langmem_paging.step.form import Draft, cut_pages, form_pages, free_runs
from langmem_paging.step.io import Flow, Reserve, with_terms
from langmem_paging.strategies.clusters import merge_terms
from langmem_paging.strategies.policy import Candidate, PolicyContext
from langmem_paging.strategies.tiers import importance

__all__ = ["evict", "evict_resident", "unbookmarked"]


def evict(ctx: StepContext) -> Flow[None]:
    """Cut pages from the free units and evict until the context is under its target; when
    nothing else is left, the still-open tails of the free runs become pages too."""
    closed, open_tails = [], []
    for run in free_runs(ctx):
        pages, tail = cut_pages(ctx, run)
        closed += pages
        if tail and run.closed:  # nothing can ever join it: it is a page now
            closed.append(tail)
        elif tail:
            open_tails.append(tail)
    if closed:
        yield from form_pages(ctx, [Draft(units) for units in closed])
    policy_context = ctx.policy_context()
    while True:
        yield from evict_resident(ctx, policy_context)
        if ctx.total <= ctx.target or not open_tails:
            return
        yield from form_pages(ctx, [Draft(tail) for tail in open_tails])
        open_tails = []


@dataclass
class _Pass:
    """One eviction pass: what is left to choose from and what waits for a cluster."""

    candidates: list[Candidate]
    context: PolicyContext
    clustered: bool
    """A cluster exists (in the view, or starts this step) for pages smaller than their bookmark."""
    waiting: list[Candidate] = field(default_factory=list)
    waiting_tokens: int = 0
    restored: list[Page] = field(default_factory=list)
    """Pages whose messages changed while resident: stored again under new numbers."""


def evict_resident(ctx: StepContext, context: PolicyContext) -> Flow[None]:
    """Evict resident pages and recall results until the context is under its target."""
    yield from with_terms(ctx.state, (), ctx.state.clusters)  # what joining a cluster would cost
    current = _Pass(_candidates(ctx), context, ctx.cluster_in_view() or bool(unbookmarked(ctx)))
    limit = ctx.options.policy.resident_limit(ctx.options.budget)
    while current.candidates and (
        ctx.total > ctx.target or (limit is not None and _resident(current) > limit)
    ):
        victim = ctx.options.policy.victim(current.candidates, current.context)
        current.candidates = [c for c in current.candidates if c.key != victim.key]
        if victim.kind == "copy":
            _shrink_copy(ctx, current, victim)
        else:
            _evict_candidate(ctx, current, victim)
    if current.restored:
        yield from _renumber(ctx, current.restored)


def _resident(current: _Pass) -> int:
    return sum(c.tokens for c in current.candidates if c.kind == "page")


def _shrink_copy(ctx: StepContext, current: _Pass, victim: Candidate) -> None:
    """A recall result leaves the context as a reference (its pages are stored already)."""
    copy = ctx.messages[victim.position]
    assert isinstance(copy, ToolMessage), "a recall copy is a tool result"
    shrunk = shrink_recall_copy(copy)
    saved = victim.tokens - ctx.options.count_message(shrunk)
    if saved <= 0:
        return
    ctx.replace[victim.key] = shrunk
    ctx.total -= saved
    current.context.evicted.append(victim)


def _evict_candidate(ctx: StepContext, current: _Pass, victim: Candidate) -> None:
    """Evict a resident page, unless it is no bigger than its bookmark and no cluster can take it
    for less than it saves (then it waits, or stays)."""
    page = ctx.state.pages[victim.key]
    bookmark_tokens = ctx.options.count_message(bookmark_message(victim.key, page.bookmark, page.ids[0]))
    page_tokens = sum(ctx.tokens_now(ctx.position[key]) for key in page.ids)
    evicting = [victim]
    if bookmark_tokens >= page_tokens and not current.clustered:
        current.waiting.append(victim)
        current.waiting_tokens += page_tokens
        first = current.waiting[0]
        first_cluster = _cluster_cost(ctx, ctx.state.pages[first.key], first.key)
        if current.waiting_tokens <= first_cluster:
            return
        ctx.total += first_cluster
        current.clustered, evicting, current.waiting = True, current.waiting, []
    elif bookmark_tokens >= page_tokens and page_tokens <= _join_growth(ctx, page, victim.key):
        return  # going straight into the cluster would grow its bookmark by more than it saves
    for chosen in evicting:
        ctx.total -= _evict_page(ctx, chosen.key, current.restored)
        left = ctx.result.evicted_ids[chosen.key]  # recall copies inside the page leave with it
        current.candidates = [c for c in current.candidates if c.kind != "copy" or c.key not in left]
        current.context.evicted.append(chosen)


def _candidates(ctx: StepContext) -> list[Candidate]:
    """Resident pages (as this step left them), and unshrunk recall results outside protected units."""
    out = [
        c
        for page_id, page in ctx.state.pages.items()
        if (c := _page_candidate(ctx, page_id, page)) is not None
    ]
    protected = {ctx.keys[i] for k in ctx.protected for i in range(ctx.units[k].start, ctx.units[k].end)}
    for i, message in enumerate(ctx.messages):
        pages = recall_copy_pages(message)
        key = ctx.keys[i]
        if not pages or library_mark(message).get("shrunk") or key in protected or key in ctx.replace:
            continue
        stats = [ctx.state.access(p) for p in pages]
        last = max((s[1] for s in stats), default=ctx.state.turn)
        out.append(
            Candidate(
                key=key,
                kind="copy",
                page_ids=tuple(pages),
                position=i,
                tokens=ctx.counts[i],
                created_turn=last,
                last_access=last,
                access_count=max((s[0] for s in stats), default=1),
                messages=(message,),
            )
        )
    return out


def _page_candidate(ctx: StepContext, page_id: str, page: ResidentPage) -> Candidate | None:
    """A resident page as a candidate; None while the step replaced one of its messages (other than
    by shrinking a recall copy inside it, or paging a tool result inside it on arrival)."""
    where = [ctx.position[k] for k in page.ids]
    current = [ctx.replace.get(ctx.keys[i], ctx.messages[i]) for i in where]
    if not all(
        m is ctx.messages[i] or is_shrunk_copy(m) or is_result_stub(m)
        for m, i in zip(current, where, strict=True)
    ):
        return None
    tokens = sum(ctx.tokens_now(i) for i in where)
    return Candidate(
        key=page_id,
        kind="page",
        page_ids=(page_id,),
        position=where[0],
        tokens=tokens,
        created_turn=page.turn,
        last_access=page.last,
        access_count=page.count,
        messages=tuple(m for m in current if m is not None),
        features=page.features,
        terms=page.terms,
    )


def _join_growth(ctx: StepContext, page: ResidentPage, page_id: str) -> int:
    """Tokens a cluster bookmark in the view would grow by if this page joined it (the most of
    any such cluster; 0 with none)."""

    n = page_number(page_id)
    growth = 0
    for cid, cluster in ctx.state.clusters.items():
        shown = ctx.current(cluster.anchor) if cluster.anchor in ctx.position else None
        if shown is None or library_mark(shown).get("cluster") != cid:
            continue
        joined = cluster_bookmark_tokens(
            merge_terms(cluster.terms, page.terms),
            (min(cluster.first, n), max(cluster.last, n), cluster.size + 1),
            max_keywords=ctx.options.clusters.max_keywords,
            count_message=ctx.options.count_message,
            cluster_id=cid,
        )
        growth = max(growth, joined - ctx.options.count_message(shown))
    return growth


def _cluster_cost(ctx: StepContext, page: ResidentPage, page_id: str) -> int:
    """Tokens of the cluster bookmark this page would start, or make joining a cluster not in the
    view (the largest such): an upper estimate."""

    n = page_number(page_id)
    shapes = [(dict(page.terms), (n, n, 1))]
    shapes += [
        (merge_terms(c.terms, page.terms), (min(c.first, n), max(c.last, n), c.size + 1))
        for c in ctx.state.clusters.values()
    ]
    return max(
        cluster_bookmark_tokens(
            terms,
            span,
            max_keywords=ctx.options.clusters.max_keywords,
            count_message=ctx.options.count_message,
        )
        for terms, span in shapes
    )


def _evict_page(ctx: StepContext, page_id: str, restored: list[Page]) -> int:
    """Evict a resident page: its bookmark replaces its messages, or nothing when the bookmark is no
    smaller (the page goes straight into the nearest cluster when the step folds). Returns the
    tokens saved."""
    count = ctx.options.count_message
    page = ctx.state.pages.pop(page_id)
    bookmark = bookmark_message(page_id, page.bookmark, page.ids[0])
    cost = count(bookmark)
    current = [m for key in page.ids if (m := ctx.current(key)) is not None]
    page_tokens = sum(ctx.tokens_now(ctx.position[key]) for key in page.ids)
    direct = cost >= page_tokens
    if messages_digest([stored_form(m) for m in current]) != page.digest:
        restored.append(_restored_page(ctx, page_id, page, current))  # renumbered: see _renumber
    ctx.state.shown[page_id] = ShownPage(
        anchor=page.ids[0],
        tokens=cost,
        page_tokens=page_tokens,
        turn=page.turn,
        last=page.last,
        count=page.count,
        terms=dict(page.terms),
        bookmark=page.bookmark,
        weight=importance(current),
    )
    ctx.replace[page.ids[0]] = None if direct else bookmark
    for key in page.ids[1:]:
        ctx.replace[key] = None
    ctx.result.evicted_ids[page_id] = list(page.ids)
    ctx.result.evicted.append(page_id)
    return page_tokens - (0 if direct else cost)


def _restored_page(ctx: StepContext, page_id: str, page: ResidentPage, current: list[BaseMessage]) -> Page:
    """A page whose messages changed while resident (edited or removed) is stored again as it is."""
    msgs = [stored_form(m) for m in current]
    return Page(
        id=page_id,
        messages=msgs,
        bookmark=page.bookmark,
        keywords=[],
        token_count=page.tokens,
        boundary=ctx.options.boundary.name,
        created_turn=page.turn,
        order=page.order,
        digest=messages_digest(msgs),
        features={**page.features, "terms": dict(page.terms)},
    )


def _renumber(ctx: StepContext, restored: list[Page]) -> Flow[None]:
    """Give pages whose messages changed while resident new numbers: the record under the old
    number may be another branch's (it was stored before a fork), never rewritten."""
    numbers = yield from ask(Reserve("p", [p.digest for p in restored], ctx.state))
    result = ctx.result
    for page, number in zip(restored, numbers, strict=True):
        old, new = page.id, f"p{number}"
        shown = ctx.state.shown.pop(old)
        shown.bookmark = shown.bookmark.replace(f"[{old}:", f"[{new}:", 1)
        ctx.state.shown[new] = shown
        page.id, page.bookmark = new, shown.bookmark
        if ctx.replace.get(shown.anchor) is not None:
            ctx.replace[shown.anchor] = bookmark_message(new, shown.bookmark, shown.anchor)
        result.evicted_ids[new] = result.evicted_ids.pop(old)
        result.evicted[result.evicted.index(old)] = new
        result.pages.append(page)


def unbookmarked(ctx: StepContext) -> list[str]:
    """Pages this step evicted straight into a cluster: shown, but no message shows them yet."""
    return [
        pid
        for pid in ctx.result.evicted
        if pid in ctx.state.shown and ctx.replace.get(ctx.state.shown[pid].anchor, "") is None
    ]
