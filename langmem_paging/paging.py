"""The paging step as a pure function: messages + ledger in, paged view + updates out.

Flow: messages -> pages (boundary) -> policy (which page goes) -> bookmark ->
pages to store -> view. No I/O happens here; `langmem_paging.pager.Pager` reads
the ledger, calls `page_messages`, writes the new pages *before* anything shows
their bookmarks, then writes the ledger.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage, RemoveMessage, ToolMessage

from langmem_paging.bookmarks import BookmarkContext, Bookmarker, KeywordBookmarker, bookmark_message
from langmem_paging.boundaries import BoundaryStrategy, get_boundary
from langmem_paging.messages import (
    Unit,
    bookmark_page_id,
    is_bookmark,
    is_pinned,
    is_user_turn,
    recall_copy_pages,
    require_ids,
    split_units,
)
from langmem_paging.policies import Candidate, EvictionPolicy, PolicyContext, get_policy
from langmem_paging.recall_text import expand_recall_copy, shrink_recall_copy
from langmem_paging.records import Ledger, Page, PageEntry
from langmem_paging.text import content_terms
from langmem_paging.tokens import TokenCounter, message_text

__all__ = ["PagingResult", "apply_ledger", "page_messages", "reconstruct_history"]

TokenCounterFn = Callable[[Sequence[BaseMessage]], int]


@dataclass
class PagingResult:
    """What one paging step decided."""

    view: list[BaseMessage]
    """The messages the model should receive: resident messages with bookmarks in place."""
    ledger: Ledger
    """The thread's updated ledger (the input ledger is never mutated)."""
    pages: list[Page] = field(default_factory=list)
    """Pages evicted by this step, to write to the store before the view is used."""
    updates: list[BaseMessage] = field(default_factory=list)
    """`add_messages` updates that turn the state into the view: bookmarks that take the
    id of their page's first message, `RemoveMessage` for the page's other messages,
    shrunk recall results under their own id."""
    tokens_before: int = 0
    """Tokens of the view before this step."""
    tokens: int = 0
    """Tokens of `view`."""
    over_budget: bool = False
    """True when even after paging the view exceeds `max_tokens` (too much is protected)."""
    ledger_changed: bool = False
    """True when the ledger must be written back."""


def apply_ledger(messages: Sequence[BaseMessage], ledger: Ledger) -> list[BaseMessage]:
    """What the model sees: evicted pages as bookmarks, shrunk recall results as references.

    Idempotent: state that already holds the bookmarks (replace mode) maps to itself.
    """
    evicted = [e for e in ledger.pages if e.evicted]
    first_ids = {e.message_ids[0]: e for e in evicted}
    hidden = {mid for e in evicted for mid in e.message_ids[1:]}
    shrunk = set(ledger.shrunk_copies)
    view: list[BaseMessage] = []
    for message in messages:
        entry = first_ids.get(message.id)
        if entry is not None:
            if bookmark_page_id(message) == entry.id:
                view.append(message)
            else:
                view.append(bookmark_message(entry.id, entry.bookmark or "", message.id))
        elif message.id in hidden:
            continue
        elif message.id in shrunk and isinstance(message, ToolMessage):
            view.append(shrink_recall_copy(message))
        else:
            view.append(message)
    return view


def reconstruct_history(
    messages: Sequence[BaseMessage], pages: Mapping[str, Page], counter: TokenCounter | None = None
) -> list[BaseMessage]:
    """The original history from the resident messages and the stored pages, exactly.

    Bookmarks expand to their page's messages; shrunk recall results are
    re-rendered from the pages they referenced.
    """
    out: list[BaseMessage] = []
    for message in messages:
        page_id = bookmark_page_id(message)
        expanded = pages[page_id].messages if page_id is not None else [message]
        for m in expanded:
            if isinstance(m, ToolMessage) and recall_copy_pages(m):
                m = expand_recall_copy(m, pages, counter or TokenCounter())
            out.append(m)
    return out


def _newest_user_index(messages: Sequence[BaseMessage]) -> int | None:
    for i in range(len(messages) - 1, -1, -1):
        if is_user_turn(messages[i]):
            return i
    return None


def _form_pages(
    units: list[Unit], lookahead: Unit | None, boundary: BoundaryStrategy, count_message
) -> tuple[list[list[Unit]], list[Unit]]:
    """Cut `units` into closed pages plus the still-open tail. Pinned units are skipped
    and end the running page: a page is a run of consecutive messages."""
    closed: list[list[Unit]] = []
    running: list[Unit] = []
    for unit in units:
        if any(is_pinned(m) or is_bookmark(m) for m in unit.messages):
            if running:
                closed.append(running)
            running = []
            continue
        if running and boundary.starts_new_page(running, unit, count_message):
            closed.append(running)
            running = []
        running.append(unit)
    if running and lookahead is not None and boundary.starts_new_page(running, lookahead, count_message):
        closed.append(running)
        running = []
    return closed, running


def _register_page(ledger: Ledger, units: list[Unit], count_message) -> PageEntry:
    messages = [m for u in units for m in u.messages]
    entry = PageEntry(
        id=f"p{ledger.next_page}",
        message_ids=[m.id for m in messages],
        tokens=sum(count_message(m) for m in messages),
        created_turn=ledger.turn,
        last_access=ledger.turn,
    )
    ledger.next_page += 1
    ledger.pages.append(entry)
    for term in set(content_terms("\n".join(message_text(m) for m in messages))):
        ledger.doc_freq[term] = ledger.doc_freq.get(term, 0) + 1
    return entry


def page_messages(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int,
    low_water_tokens: int | None = None,
    ledger: Ledger | None = None,
    boundary: str | BoundaryStrategy = "fixed_20",
    policy: str | EvictionPolicy = "fifo",
    bookmarker: Bookmarker | None = None,
    token_counter: TokenCounterFn | None = None,
    text_counter: TokenCounter | None = None,
    recent_messages: int = 6,
) -> PagingResult:
    """Page out old messages until the context fits, leaving bookmarks in their place.

    When the view exceeds `max_tokens`, messages before the newest user message are
    cut into pages by `boundary`, and `policy` evicts pages (or shrinks earlier
    recall results) until the view is at most `low_water_tokens`. Pages, once cut,
    keep their boundaries, and a bookmark once written never changes.

    Args:
        messages: The full message list (state), each with an id.
        max_tokens: Budget for everything the model receives from the list.
        low_water_tokens: Page down to this when over budget (default 75% of `max_tokens`).
        ledger: The thread's ledger from earlier steps (None for a new thread).
        boundary: Boundary strategy or its name (`fixed_20`, `exchange`, `session`, ...).
        policy: Eviction policy or its name (`fifo`, `lru`, `lfu`, `semantic`).
        bookmarker: Makes bookmark text (default `KeywordBookmarker`).
        token_counter: Counts a message list (default tiktoken via `TokenCounter`).
        text_counter: tiktoken counter for bookmark lengths and recall rendering.
        recent_messages: Messages before the current turn that count as recent context
            for the semantic policy.

    Returns:
        A `PagingResult`.

    Raises:
        ValueError: If a message has no id, or a budget is not positive or inconsistent.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> history = []
        >>> for i in range(6):
        ...     history += [HumanMessage(f"Trip {i} to city{i}?", id=f"h{i}"),
        ...                 AIMessage(f"Booked city{i}.", id=f"a{i}")]
        >>> result = page_messages(history, max_tokens=8, low_water_tokens=6,
        ...                        boundary="fixed_2", token_counter=len)
        >>> [m.content for m in result.view]
        ['[p1:city0,Booked,Trip]', '[p2:city1,Booked,Trip]', '[p3:city2,Booked,Trip]', '[p4:city3,Booked,Trip]', '[p5:city4,Booked,Trip]', 'Trip 5 to city5?', 'Booked city5.']
        >>> [p.id for p in result.pages], result.tokens
        (['p1', 'p2', 'p3', 'p4', 'p5'], 7)
    """
    if max_tokens <= 0:
        raise ValueError("`max_tokens` must be a positive number of tokens.")
    if low_water_tokens is None:
        low_water_tokens = max(1, int(max_tokens * 0.75))
    if not 0 < low_water_tokens <= max_tokens:
        raise ValueError("`low_water_tokens` must be positive and at most `max_tokens`.")
    require_ids(messages)
    boundary = get_boundary(boundary)
    policy = get_policy(policy)
    bookmarker = bookmarker or KeywordBookmarker()
    text_counter = text_counter or TokenCounter()
    if token_counter is None:
        count_message = text_counter.count_message
    else:
        count_message = lambda m: token_counter([m])  # noqa: E731

    ledger = copy.deepcopy(ledger) if ledger is not None else Ledger()
    newest_user = _newest_user_index(messages)
    changed = False
    if newest_user is not None and messages[newest_user].id != ledger.last_user_message_id:
        ledger.turn += 1
        ledger.last_user_message_id = messages[newest_user].id
        changed = True

    view = apply_ledger(messages, ledger)
    tokens_before = tokens = sum(count_message(m) for m in view)
    result = PagingResult(view=view, ledger=ledger, tokens_before=tokens_before, tokens=tokens)
    if tokens <= max_tokens:
        result.ledger_changed = changed
        return result

    # Pages are cut from the messages after the last page formed (the cut only moves
    # forward) up to the newest user message; an unanswered tool call stops the cut.
    formed = {mid for e in ledger.pages for mid in e.message_ids}
    frontier = next((i + 1 for i in range(len(messages) - 1, -1, -1) if messages[i].id in formed), 0)
    limit = newest_user if newest_user is not None else len(messages)
    units = split_units(messages, frontier, len(messages))
    pageable = [u for u in units if u.end <= limit]
    first_unanswered = next((k for k, u in enumerate(pageable) if not u.answered), None)
    if first_unanswered is not None:
        pageable = pageable[:first_unanswered]
    lookahead = units[len(pageable)] if len(pageable) < len(units) else None
    closed, open_tail = _form_pages(pageable, lookahead, boundary, count_message)
    for units_of_page in closed:
        _register_page(ledger, units_of_page, count_message)
    by_id = {m.id: m for m in messages}
    position = {m.id: i for i, m in enumerate(messages)}
    recent_start = max(0, (limit if newest_user is not None else len(messages)) - recent_messages)
    context_text = "\n".join(message_text(m) for m in messages[recent_start:])
    new_pages: list[Page] = []
    new_shrunk: list[str] = []

    while tokens > low_water_tokens:
        candidates = _candidates(messages[:limit], ledger, view, position, count_message)
        if not candidates and open_tail:
            _register_page(ledger, open_tail, count_message)
            open_tail = []
            continue
        if not candidates:
            break
        context = PolicyContext(
            turn=ledger.turn, recent_text=context_text, doc_freq=ledger.doc_freq, n_docs=len(ledger.pages)
        )
        victim = policy.victim(candidates, context)
        if victim.kind == "copy":
            ledger.shrunk_copies.append(victim.key)
            new_shrunk.append(victim.key)
        else:
            entry = ledger.entry(victim.key)
            page_msgs = [by_id[mid] for mid in entry.message_ids]
            stored = [shrink_recall_copy(m) if recall_copy_pages(m) else m for m in page_msgs]
            bookmark, keywords = bookmarker(
                entry.id,
                stored,
                BookmarkContext(ledger.doc_freq, len(ledger.pages), text_counter.count_text),
            )
            entry.evicted = True
            entry.bookmark = bookmark
            new_pages.append(
                Page(
                    id=entry.id,
                    messages=stored,
                    bookmark=bookmark,
                    keywords=keywords,
                    token_count=entry.tokens,
                    boundary=boundary.name,
                    created_turn=entry.created_turn,
                    last_access=entry.last_access,
                    access_count=entry.access_count,
                )
            )
        view = apply_ledger(messages, ledger)
        tokens = sum(count_message(m) for m in view)

    result.view, result.tokens, result.pages = view, tokens, new_pages
    result.over_budget = tokens > max_tokens
    result.ledger_changed = True
    result.updates = _state_updates(messages, ledger, new_pages, new_shrunk, by_id)
    return result


def _candidates(pageable_prefix, ledger: Ledger, view, position, count_message) -> list[Candidate]:
    """Resident pages, and unshrunk recall results before the current turn."""
    view_by_id = {m.id: m for m in view}
    out = []
    for entry in ledger.pages:
        if entry.evicted:
            continue
        msgs = [view_by_id[mid] for mid in entry.message_ids if mid in view_by_id]
        out.append(
            Candidate(
                key=entry.id,
                kind="page",
                page_ids=(entry.id,),
                position=position[entry.message_ids[0]],
                tokens=sum(count_message(m) for m in msgs),
                text="\n".join(message_text(m) for m in msgs),
                created_turn=entry.created_turn,
                last_access=entry.last_access,
                access_count=entry.access_count,
            )
        )
    shrunk = set(ledger.shrunk_copies)
    for message in pageable_prefix:
        pages = recall_copy_pages(message)
        if not pages or message.id in shrunk or message.id not in view_by_id:
            continue
        entries = [e for e in (ledger.entry(p) for p in pages) if e is not None]
        out.append(
            Candidate(
                key=message.id,
                kind="copy",
                page_ids=tuple(pages),
                position=position[message.id],
                tokens=count_message(message),
                text=message_text(message),
                created_turn=max((e.last_access for e in entries), default=ledger.turn),
                last_access=max((e.last_access for e in entries), default=ledger.turn),
                access_count=max((e.access_count for e in entries), default=1),
            )
        )
    return out


def _state_updates(messages, ledger: Ledger, new_pages: list[Page], new_shrunk: list[str], by_id):
    """`add_messages` updates that replace each new page by its bookmark, in place."""
    updates: list[BaseMessage] = []
    hidden: set[str] = set()
    for page in new_pages:
        first, *rest = [m.id for m in page.messages]
        updates.append(bookmark_message(page.id, page.bookmark, first))
        updates.extend(RemoveMessage(id=mid) for mid in rest if mid in by_id)
        hidden.update([first, *rest])
    for mid in new_shrunk:
        if mid not in hidden:
            updates.append(shrink_recall_copy(by_id[mid]))
    return updates
