"""Phase 3: pages are cut from the free units (forward only: a page, once cut, keeps its
boundaries) and formed: numbered, bookmarked, given their policy features, recorded as resident."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import BaseMessage

from langmem_paging.core.effects import ask
from langmem_paging.core.library_messages import stored_form
from langmem_paging.core.messages import Unit, is_pinned
from langmem_paging.core.records import Page, messages_digest, page_number
from langmem_paging.core.state import ResidentPage
from langmem_paging.core.text import search_terms
from langmem_paging.core.tokens import message_text
from langmem_paging.step.context import StepContext
from langmem_paging.step.io import ComputeFeatures, Flow, LoadSketch, MakeBookmarks, Reserve
from langmem_paging.strategies.bookmarks import Bookmark, BookmarkContext, PageDraft

__all__ = ["Draft", "FreeRun", "cut_pages", "form_pages", "free_runs"]


@dataclass
class Draft:
    """A page being formed in this step."""

    units: list[Unit]
    """Its units, in order."""
    kind: Literal["page", "tool_result"] = "page"
    """``page``, or ``tool_result`` (one large tool result paged on arrival)."""

    @property
    def indexes(self) -> Iterator[int]:
        """Positions of its messages in the view."""
        return (i for u in self.units for i in range(u.start, u.end))

    @property
    def messages(self) -> list[BaseMessage]:
        """Its messages as they are in the view."""
        return [m for u in self.units for m in u.messages]


@dataclass
class FreeRun:
    """A maximal run of units no page holds and nothing protects."""

    units: list[Unit]
    """The run."""
    following: Unit | None
    """The unit after it that could still join its last page (None: nothing can)."""
    closed: bool
    """True when nothing can ever join it (a page, a bookmark, a pinned message or a gap follows)."""


def free_runs(ctx: StepContext) -> list[FreeRun]:
    """The free runs of the view: runs end at protected or paged units, and where a page once stood
    between two units (the history is not contiguous there)."""
    formed = {k for page in ctx.state.pages.values() for k in page.ids}
    library = ctx.library_keys()
    runs: list[FreeRun] = []
    current: list[Unit] = []
    for k, unit in enumerate(ctx.units):
        keys = ctx.keys[unit.start : unit.end]
        free = k not in ctx.protected and not any(key in formed for key in keys)
        if free and current and not _contiguous(ctx, current[-1], unit):
            runs.append(FreeRun(current, None, True))
            current = []
        if free:
            current.append(unit)
        elif current:
            closed = _ends_for_good(unit, keys, formed | library)
            runs.append(FreeRun(current, None if closed else unit, closed))
            current = []
    if current:
        runs.append(FreeRun(current, None, False))
    return runs


def _ends_for_good(unit: Unit, keys: list[str], taken: set[str]) -> bool:
    """A run before a page, a bookmark or a pinned message can never grow into it."""
    return any(key in taken for key in keys) or any(is_pinned(m) for m in unit.messages)


def _contiguous(ctx: StepContext, before: Unit, unit: Unit) -> bool:
    """True when `unit` follows `before` in the history (no page left from between them)."""
    order = ctx.state.order
    return order.get(ctx.keys[unit.start], -2) == order.get(ctx.keys[before.end - 1], -2) + 1


def cut_pages(ctx: StepContext, run: FreeRun) -> tuple[list[list[Unit]], list[Unit]]:
    """Cut a free run into closed pages and an open tail (which may still grow)."""
    boundary, count = ctx.options.boundary, ctx.options.count_message
    closed: list[list[Unit]] = []
    running: list[Unit] = []
    for unit in run.units:
        if running and boundary.starts_new_page(running, unit, count):
            closed.append(running)
            running = []
        running.append(unit)
    if running and run.following is not None and boundary.starts_new_page(running, run.following, count):
        closed.append(running)
        running = []
    return closed, running


def form_pages(ctx: StepContext, drafts: list[Draft]) -> Flow[list[Page]]:
    """Give drafts page ids, bookmarks and features, and record them as resident pages. A number
    the store already holds with these very messages (a retried step, or another branch that made
    the page) is that page: its record is taken as stored, never made again (a page never changes)."""
    stored: list[Sequence[BaseMessage]] = [[stored_form(m) for m in _current(ctx, d)] for d in drafts]
    digests = [messages_digest(msgs) for msgs in stored]
    numbers = yield from ask(Reserve("p", digests, ctx.state))
    page_drafts = [PageDraft(f"p{n}", msgs) for n, msgs in zip(numbers, stored, strict=True)]
    context = yield from _bookmark_context(ctx, page_drafts)
    new = [(k, d) for k, (n, d) in enumerate(zip(numbers, page_drafts, strict=True)) if n not in numbers.held]
    made = yield from _make(ctx, [d for _, d in new], context)
    held = {n: Page.from_dict(value) for n, value in numbers.held.items()}
    fresh = dict(zip((k for k, _ in new), made, strict=True))
    pages = [
        _record(ctx, draft, held.get(n) or _page(ctx, draft, page_draft, digest, *fresh[k]))
        for k, (draft, page_draft, digest, n) in enumerate(
            zip(drafts, page_drafts, digests, numbers, strict=True)
        )
    ]
    ctx.result.pages.extend(pages)
    ctx.result.formed.extend(p.id for p in pages)
    return pages


def _make(
    ctx: StepContext, drafts: list[PageDraft], context: BookmarkContext
) -> Flow[list[tuple[Bookmark, dict[str, Any]]]]:
    """Bookmarks and policy features of new pages."""
    if not drafts:
        return []
    bookmarks = yield from ask(MakeBookmarks(ctx.options.bookmarker, drafts, context))
    if len(bookmarks) != len(drafts):
        raise ValueError(f"The bookmarker returned {len(bookmarks)} bookmarks for {len(drafts)} pages.")
    features = yield from ask(ComputeFeatures(ctx.options.policy, [d.messages for d in drafts]))
    return list(zip(bookmarks, features, strict=True))


def _current(ctx: StepContext, draft: Draft) -> list[BaseMessage]:
    """The draft's messages as the step has left them: a result paged on arrival earlier in this
    step is its stub in the page too (its text is stored once, in its own page)."""
    return [m for i in draft.indexes if (m := ctx.current(ctx.keys[i])) is not None]


def _page(
    ctx: StepContext,
    draft: Draft,
    page_draft: PageDraft,
    digest: str,
    bookmark: Bookmark,
    features: dict[str, Any],
) -> Page:
    """A new page's record."""
    state = ctx.state
    return Page(
        id=page_draft.id,
        messages=list(page_draft.messages),
        bookmark=bookmark.text,
        keywords=list(bookmark.keywords),
        token_count=sum(ctx.tokens_now(i) for i in draft.indexes),
        boundary="tool_result" if draft.kind == "tool_result" else ctx.options.boundary.name,
        created_turn=state.turn,
        order=state.order.get(ctx.keys[next(iter(draft.indexes))], state.next_order),
        digest=digest,
        kind=draft.kind,
        features={**features, "terms": dict(bookmark.terms)},
        last_access=state.turn,
    )


def _record(ctx: StepContext, draft: Draft, page: Page) -> Page:
    """Record `page` as resident in the state (its entry is derived from the record)."""
    state = ctx.state
    ids = [ctx.keys[i] for i in draft.indexes]
    if draft.kind == "page":  # a tool result paged on arrival keeps its stub's ordinal
        for key in ids:
            state.order.pop(key, None)
    terms = page.features.get("terms")
    state.pages[page.id] = ResidentPage(
        ids=ids,
        order=page.order,
        tokens=page.token_count,
        turn=page.created_turn,
        last=state.turn,
        bookmark=page.bookmark,
        digest=page.digest,
        terms=dict(terms) if isinstance(terms, dict) else {},
        features={k: v for k, v in page.features.items() if k != "terms"},
    )
    return page


def _bookmark_context(ctx: StepContext, drafts: list[PageDraft]) -> Flow[BookmarkContext]:
    """Page frequencies over the thread (a bounded sketch of its frequent terms), counting the
    pages formed now. The sketch is read once per step (a second batch of pages, e.g. after
    tool results paged on arrival, counts into the one already read)."""
    sketch = ctx.state.pending_sketch
    if sketch is None:
        sketch = yield from ask(LoadSketch(ctx.state))
    for draft in drafts:
        terms = search_terms("\n".join(message_text(m) for m in draft.messages))
        sketch.count(page_number(draft.id), dict.fromkeys(terms))
    ctx.state.keep_sketch(sketch)
    return BookmarkContext(
        count_text=ctx.options.count_text, doc_freq=dict(sketch.doc_freq), n_docs=sketch.n_pages
    )
