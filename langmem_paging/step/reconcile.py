"""Phase 1: make the branch's state agree with the context it is shown (the app may have removed,
replaced or rewritten messages since the last step), advance the turn clock, and give messages
seen for the first time their history ordinals."""

from __future__ import annotations

from langmem_paging.core.messages import library_mark
from langmem_paging.step.context import StepContext

__all__ = ["number_new_messages", "reconcile"]


def reconcile(ctx: StepContext) -> None:
    """Advance the turn on a new user message; drop what left the context from the state; note
    the bookmarks and cluster bookmarks whose message is gone (orphans)."""
    state = ctx.state
    if ctx.newest_user is not None and ctx.keys[ctx.newest_user] != state.last_user:
        state.turn += 1
        state.last_user = ctx.keys[ctx.newest_user]
    _forget_removed(ctx)
    ctx.orphans = [
        pid for pid, shown in state.shown.items() if not _shows(ctx, shown.anchor, "bookmark", pid)
    ]
    ctx.orphan_clusters = [
        cid for cid, c in state.clusters.items() if not _shows(ctx, c.anchor, "cluster", cid)
    ]
    ctx.recalled_now = {k for k in state.recalled if k in ctx.position}
    state.recalled = []


def _forget_removed(ctx: StepContext) -> None:
    """Resident pages and ordinals of messages the app removed: a page whose every message left
    stays stored and recallable (its access statistics are kept)."""
    state, position = ctx.state, ctx.position
    for page_id in list(state.pages):
        page = state.pages[page_id]
        ids = [i for i in page.ids if i in position]
        if not ids:
            state.pages.pop(page_id)
            if page.count:
                state.stats[page_id] = [page.count, page.last]
        elif len(ids) != len(page.ids):
            page.ids = ids
    for key in [k for k in state.order if k not in position]:
        del state.order[key]


def _shows(ctx: StepContext, anchor: str, kind: str, ident: str) -> bool:
    at = ctx.position.get(anchor)
    return at is not None and library_mark(ctx.messages[at]).get(kind) == ident


def number_new_messages(ctx: StepContext) -> None:
    """Give messages seen for the first time history ordinals that put them where the list has them.

    New messages at the end (the usual case) take the next ordinals. New messages before all the
    context's older ones (a rewrite put them first, as ``REMOVE_ALL_MESSAGES`` with a summary does)
    are numbered below every ordinal given. New messages a rewrite put between older ones share the
    ordinal just below the next older message's: `reconstruct_history` breaks ties by list order,
    so paged or not they rebuild in their place, not at the end."""
    state = ctx.state
    in_pages = {k: page.order for page in state.pages.values() for k in page.ids[:1]}
    paged = {k for page in state.pages.values() for k in page.ids}
    library = ctx.library_keys()
    new = [
        not (key in state.order or key in paged or (key in library and library_mark(message)))
        for key, message in zip(ctx.keys, ctx.messages, strict=True)
    ]  # (a message that took a library message's id, or only copies its metadata, is new)
    front = new.index(False) if False in new else 0
    following = _following_ordinals(ctx, new, in_pages)
    for n, (key, is_new) in enumerate(zip(ctx.keys, new, strict=True)):
        if not is_new:
            continue
        if n < front:
            state.order[key] = state.low_order - front + n
        elif (successor := following[n]) is not None:
            state.order[key] = successor - 1
        else:
            state.order[key] = state.next_order
            state.next_order += 1
    state.low_order -= front


def _following_ordinals(ctx: StepContext, new: list[bool], first_of_page: dict[str, int]) -> list[int | None]:
    """For each position, the ordinal of the next older message after it whose ordinal is known (a
    resident message, or the first of a resident page), or None when none follows."""
    out: list[int | None] = [None] * len(new)
    known: int | None = None
    for n in range(len(new) - 1, -1, -1):
        out[n] = known
        key = ctx.keys[n]
        if not new[n]:
            known = ctx.state.order.get(key, first_of_page.get(key, known))
    return out
