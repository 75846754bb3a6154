"""Phase 5 (tiers on): which evicted pages stay warm, shown as a digest of their key lines instead
of a keyword bookmark: best rank first, while their digests fit the warm budget and the room the
budget leaves. Pages that fall out of the warm tier go back to their bookmark (cold)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langchain_core.messages import BaseMessage

from langmem_paging.core.effects import ask
from langmem_paging.core.library_messages import (
    bookmark_message,
    digest_message,
    format_bookmark,
    stored_form,
)
from langmem_paging.core.messages import library_mark
from langmem_paging.core.records import Page, page_number
from langmem_paging.core.state import ShownPage
from langmem_paging.step.context import StepContext
from langmem_paging.step.io import Flow, LoadPages, MakeDigests, with_terms
from langmem_paging.strategies.tiers import TierItem, TierMode, extractive_digest

__all__ = ["present_warm"]


def present_warm(ctx: StepContext) -> Flow[None]:
    """Promote the best-ranked shown pages to warm digests and demote the others to cold."""
    tiers = ctx.options.tiers
    if tiers is None or not ctx.state.shown:
        return
    shown = _in_view(ctx)
    yield from with_terms(ctx.state, shown)  # tier scores and digests weigh terms
    costs = {pid: max(8, int(s.page_tokens * tiers.digest_ratio)) for pid, s in shown.items()}
    warm = _choose_warm(ctx, tiers, shown, costs)
    promote = [pid for pid in warm if shown[pid].tier == "cold"]
    sources, records = yield from _sources(ctx, promote)
    _keep_bookmarks(ctx, promote, records)
    texts = yield from _written(tiers, sources, costs)
    for pid in promote:
        if sources[pid]:
            digest = texts.get(pid) or extractive_digest(
                sources[pid], shown[pid].terms, max_tokens=costs[pid], count_text=ctx.options.count_text
            )
            if digest:
                _show_warm(
                    ctx,
                    pid,
                    shown[pid],
                    digest_message(
                        pid, digest, len(sources[pid]), shown[pid].anchor, tool=ctx.options.tool_name
                    ),
                )
    for pid in shown:
        if shown[pid].tier == "warm" and pid not in warm:
            _show(ctx, shown[pid], bookmark_message(pid, shown[pid].bookmark, shown[pid].anchor), "cold")


def _in_view(ctx: StepContext) -> dict[str, ShownPage]:
    """Shown pages whose bookmark or digest is in the view. An orphan's anchor may hold a real
    message again (a rewrite kept the messages the page was cut from): it is never written over."""
    orphans = set(ctx.orphans)
    return {pid: s for pid, s in ctx.state.shown.items() if s.anchor in ctx.position and pid not in orphans}


def _choose_warm(
    ctx: StepContext, tiers: TierMode, shown: dict[str, ShownPage], costs: dict[str, int]
) -> list[str]:
    """The pages the tier mode ranks best whose digests fit the warm room."""
    items = [
        TierItem(pid, costs[pid], s.turn, s.last, s.count, s.terms, s.weight) for pid, s in shown.items()
    ]
    recent = tiers.recent_terms(lambda: ctx.policy_context().recent_text)
    scores = tiers.scores(items, turn=ctx.state.turn, recent_terms=recent)
    ranked = sorted(items, key=lambda i: (-tiers.rank_key(i, scores[i.id]), page_number(i.id)))
    budget = ctx.options.budget
    room = min(
        tiers.warm_budget(budget),
        budget - ctx.total + sum(s.tokens for s in shown.values() if s.tier == "warm"),
    )
    warm, used = [], 0
    for item in ranked:
        if used + costs[item.id] <= room:
            warm.append(item.id)
            used += costs[item.id]
    return warm


def _keep_bookmarks(ctx: StepContext, promote: list[str], records: Mapping[str, Page]) -> None:
    """Give the pages turning warm their bookmark text, which a cold page's checkpointed entry
    leaves out: the message showing it now, else its record (read for its digest: a page without
    a bookmark was not evicted by this step). A warm page's entry keeps it, to show it again when
    the page turns cold."""
    for pid in promote:
        entry = ctx.state.shown[pid]
        if entry.bookmark:
            continue
        message = ctx.current(entry.anchor)
        if (
            message is not None
            and library_mark(message).get("bookmark") == pid
            and isinstance(message.content, str)
        ):
            entry.bookmark = message.content
        else:
            entry.bookmark = records[pid].bookmark if pid in records else format_bookmark(pid, [])


def _sources(
    ctx: StepContext, promote: list[str]
) -> Flow[tuple[dict[str, list[BaseMessage]], dict[str, Page]]]:
    """The messages to digest: still in the view for a page evicted by this step, else stored (the
    records read are returned too)."""
    in_view = {
        pid: [ctx.messages[ctx.position[k]] for k in ctx.result.evicted_ids.get(pid, []) if k in ctx.position]
        for pid in promote
    }
    missing = [pid for pid in promote if not in_view[pid]]
    loaded = (yield from ask(LoadPages(missing))) if missing else {}
    sources = {
        pid: [stored_form(m) for m in in_view[pid]] or (loaded[pid].messages if pid in loaded else [])
        for pid in promote
    }
    return sources, loaded


def _written(
    tiers: TierMode, sources: dict[str, list[BaseMessage]], costs: dict[str, int]
) -> Flow[dict[str, str]]:
    """Digests a digester has written (or writes now, when it does not work in the background)."""
    digester = tiers.digester
    if digester is None:
        return {}
    written: dict[str, str | None] = {pid: digester.ready(msgs) for pid, msgs in sources.items() if msgs}
    todo = [pid for pid, text in written.items() if text is None]
    if todo and not getattr(digester, "background", True):
        pages: list[Sequence[BaseMessage]] = [sources[p] for p in todo]
        texts = yield from ask(MakeDigests(digester, pages, [costs[p] for p in todo]))
        written.update(zip(todo, texts, strict=True))
    return {pid: text for pid, text in written.items() if text}


def _show_warm(ctx: StepContext, page_id: str, shown: ShownPage, message: BaseMessage) -> None:
    """Show a page's digest, unless its header and framing do not fit after all, or it is no smaller
    than the page it stands for (a digest must never make the context bigger): it stays cold."""
    tokens = ctx.options.count_message(message)
    if ctx.total - shown.tokens + tokens > ctx.options.budget or tokens >= shown.page_tokens:
        return
    _show(ctx, shown, message, "warm")


def _show(ctx: StepContext, shown: ShownPage, message: BaseMessage, tier: str) -> None:
    before = shown.tokens
    shown.tier, shown.tokens = tier, ctx.options.count_message(message)  # type: ignore[assignment]
    ctx.replace[shown.anchor] = message
    ctx.total += shown.tokens - before
