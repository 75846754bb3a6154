"""Phase 1b: a stand-in whose id a new message took keeps its place.

LangGraph's `add_messages` puts a message whose id a bookmark, cluster bookmark or digest has in
that stand-in's place (in view mode the render does the same once the history message under a
stand-in changed: `core.view`). To the app it is a new message, so it stays where it landed and
reaches the model; the stand-in it displaced is shown again just before it, under a new id
(`displaced_id`), so its pages keep a place in the context and the history rebuilds with both the
paged messages and the new one, in order. Nothing is folded or dropped for it (a lone cluster
has nowhere else to go), and the work is one entry per displaced stand-in.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage

from langmem_paging.core.effects import ask
from langmem_paging.core.library_messages import (
    bookmark_message,
    cluster_bookmark_text,
    cluster_keywords,
    cluster_message,
    format_bookmark,
)
from langmem_paging.core.messages import displaced_id
from langmem_paging.step.context import StepContext
from langmem_paging.step.io import Flow, LoadPages, with_terms

__all__ = ["reshow_displaced"]


def reshow_displaced(ctx: StepContext) -> Flow[None]:
    """Show each displaced stand-in again just before the message that took its id."""
    state = ctx.state
    pages = [p for p in ctx.orphans if state.shown[p].anchor in ctx.position]
    clusters = [c for c in ctx.orphan_clusters if state.clusters[c].anchor in ctx.position]
    if not pages and not clusters:
        return
    records = yield from _stored_bookmarks(ctx, pages, clusters)
    keywords = ctx.options.clusters.max_keywords
    for pid in pages:
        _reshow_page(ctx, pid, records.get(pid), keywords)
    for cid in clusters:
        _reshow_cluster(ctx, cid, keywords)
    ctx.orphans = [p for p in ctx.orphans if p not in pages]
    ctx.orphan_clusters = [c for c in ctx.orphan_clusters if c not in clusters]


def _stored_bookmarks(ctx: StepContext, pages: list[str], clusters: list[str]) -> Flow[dict[str, str]]:
    """The stored bookmarks of the displaced pages shown without one (warm: a digest), and the terms
    of those not stored and of the clusters (to make theirs from)."""
    cold = [p for p in pages if not ctx.state.shown[p].bookmark]
    records = (yield from ask(LoadPages(cold))) if cold else {}
    yield from with_terms(ctx.state, [p for p in cold if p not in records], clusters)
    return {pid: page.bookmark for pid, page in records.items()}


def _reshow_page(ctx: StepContext, pid: str, stored: str | None, keywords: int) -> None:
    """A displaced page stand-in again, as a bookmark: its own, else its record's (`stored`), else one
    made from its terms."""
    shown = ctx.state.shown[pid]
    made = stored if stored is not None else format_bookmark(pid, cluster_keywords(shown.terms, keywords))
    text = shown.bookmark or made
    key = displaced_id(shown.anchor, pid)
    shown.tier, shown.tokens = "cold", _insert(ctx, shown.anchor, bookmark_message(pid, text, key))
    shown.anchor = key


def _reshow_cluster(ctx: StepContext, cid: str, keywords: int) -> None:
    """A displaced cluster bookmark again, made from its terms."""
    entry = ctx.state.clusters[cid]
    entry.text = cluster_bookmark_text(
        cid, entry.terms, (entry.first, entry.last, entry.size), max_keywords=keywords
    )
    key = displaced_id(entry.anchor, cid)
    entry.tokens = _insert(ctx, entry.anchor, cluster_message(cid, entry.text, key))
    entry.anchor = key


def _insert(ctx: StepContext, before: str, message: BaseMessage) -> int:
    """Put `message` (a stand-in under a new id) just before the message at key `before`: a key of
    its own at that position, shown through `replace`. Returns its tokens."""
    key = str(message.id)
    ctx.position[key] = ctx.position[before]
    ctx.replace[key] = message
    ctx.inserted.setdefault(before, []).append(key)
    tokens = ctx.options.count_message(message)
    ctx.total += tokens
    return tokens
