"""Pager: one paging step with its I/O, shared by the middleware, the node and the tool.

Sync and async differ only at the store calls; everything else is the pure
`page_messages` and the pure recall planning below.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage

from langmem_paging.bookmarks import BOOKMARK_PATTERN
from langmem_paging.boundaries import get_boundary
from langmem_paging.config import PagingConfig
from langmem_paging.paging import PagingResult, page_messages
from langmem_paging.policies import get_policy
from langmem_paging.records import Ledger, Page, page_number
from langmem_paging.recall_text import recall_artifact, render_pages
from langmem_paging.store import PageStore
from langmem_paging.tokens import TokenCounter

__all__ = ["Pager", "RecallPlan"]

_PAGE_ID = re.compile(r"^p\d+$")


@dataclass
class RecallPlan:
    """A recall request after normalizing what the model sent."""

    page_ids: list[str] = field(default_factory=list)
    """Well-formed page ids, deduplicated, in the order asked."""
    malformed: list[str] = field(default_factory=list)
    """What the model sent that is not a page id."""
    query: str | None = None
    """Search text, when given."""


def plan_recall(page_ids, query) -> RecallPlan:
    """Accept ``["p3"]``, ``"p3, p5"``, ``[3]``, or pasted bookmarks ``"[p3:kw,...]"``; never raise."""
    if page_ids is None:
        raw: list = []
    elif isinstance(page_ids, str):
        raw = [page_ids]
    elif isinstance(page_ids, (list, tuple)):
        raw = list(page_ids)
    else:
        raw = [page_ids]
    raw = [f"p{item}" if isinstance(item, int) and not isinstance(item, bool) else item for item in raw]
    plan = RecallPlan(query=query.strip() if isinstance(query, str) and query.strip() else None)
    for item in raw:
        if not isinstance(item, str):
            plan.malformed.append(repr(item))
            continue
        bookmarks = [m.group(1) for m in BOOKMARK_PATTERN.finditer(item)]
        pieces = bookmarks or [p for p in re.split(r"[\s,;]+", item) if p]
        for piece in pieces:
            piece = piece.strip().strip("'\"[]").lower()
            piece = f"p{piece}" if piece.isdigit() else piece
            if _PAGE_ID.match(piece):
                if piece not in plan.page_ids:
                    plan.page_ids.append(piece)
            else:
                plan.malformed.append(repr(piece))
    return plan


class Pager:
    """Runs paging steps and recalls for one configuration over one `PageStore`."""

    def __init__(self, config: PagingConfig, page_store: PageStore) -> None:
        self.config = config
        self.page_store = page_store
        self.text_counter = TokenCounter(model=config.model, encoding=config.encoding)
        self.boundary = get_boundary(config.boundary)
        self.policy = get_policy(config.policy)

    # -- paging ----------------------------------------------------------------------
    def _page(self, messages: Sequence[BaseMessage], ledger: Ledger | None) -> PagingResult:
        return page_messages(
            messages,
            max_tokens=self.config.max_tokens,
            low_water_tokens=self.config.effective_low_water,
            ledger=ledger,
            boundary=self.boundary,
            policy=self.policy,
            bookmarker=self.config.bookmarker,
            token_counter=self.config.token_counter,
            text_counter=self.text_counter,
            recent_messages=self.config.recent_messages,
        )

    def step(self, messages: Sequence[BaseMessage], thread_id: str) -> PagingResult:
        """Page `messages`; new pages are stored before the ledger that points at them."""
        result = self._page(messages, self.page_store.get_ledger(thread_id))
        if result.ledger_changed:
            self.page_store.put_many(thread_id, result.pages, result.ledger)
        return result

    async def astep(self, messages: Sequence[BaseMessage], thread_id: str) -> PagingResult:
        """Async `step`."""
        result = self._page(messages, await self.page_store.aget_ledger(thread_id))
        if result.ledger_changed:
            await self.page_store.aput_many(thread_id, result.pages, result.ledger)
        return result

    # -- recall ----------------------------------------------------------------------
    def _answer(self, plan: RecallPlan, pages: list[Page], found: list[Page]) -> tuple[str, dict, list[str]]:
        """Tool content and artifact for a plan, given the thread's pages and search hits."""
        by_id = {p.id: p for p in pages}
        notes = []
        if plan.malformed:
            notes.append(f"Not page ids: {', '.join(plan.malformed)}. Page ids look like 'p3'.")
        unknown = [pid for pid in plan.page_ids if pid not in by_id]
        if unknown:
            notes.append(f"No such page in this conversation: {', '.join(unknown)}.")
        if plan.query is not None and not found:
            notes.append(f"No page matches the query {plan.query!r}.")
        chosen = [by_id[pid] for pid in plan.page_ids if pid in by_id]
        chosen += [p for p in found if p not in chosen]
        if not plan.page_ids and plan.query is None and not plan.malformed:
            notes.append("Pass `page_ids` (the pN of a bookmark such as [p3:...]) or a `query`.")
        if notes or not chosen:
            valid = ", ".join(p.id for p in pages) or "none yet (nothing has been paged out)"
            notes.append(f"Pages in this conversation: {valid}.")
        chosen.sort(key=lambda p: page_number(p.id))
        note = " ".join(notes)
        cap = self.config.effective_recall_max_tokens
        content = render_pages(chosen, max_tokens=cap, counter=self.text_counter, note=note)
        ids = [p.id for p in chosen]
        return content, recall_artifact(ids, max_tokens=cap, note=note), ids

    def recall(self, thread_id: str, page_ids=None, query=None) -> tuple[str, dict]:
        """Text of the asked pages (and search hits), counting an access for each."""
        plan = plan_recall(page_ids, query)
        pages, ledger = self.page_store.snapshot(thread_id)
        found = self.page_store.rank(thread_id, pages, plan.query, self.config.search_results) if plan.query else []
        content, artifact, ids = self._answer(plan, pages, found)
        if ids:
            ledger = ledger or Ledger()
            ledger.record_access(ids)
            self.page_store.put_many(thread_id, [], ledger)
        return content, artifact

    async def arecall(self, thread_id: str, page_ids=None, query=None) -> tuple[str, dict]:
        """Async `recall`."""
        plan = plan_recall(page_ids, query)
        pages, ledger = await self.page_store.asnapshot(thread_id)
        found = self.page_store.rank(thread_id, pages, plan.query, self.config.search_results) if plan.query else []
        content, artifact, ids = self._answer(plan, pages, found)
        if ids:
            ledger = ledger or Ledger()
            ledger.record_access(ids)
            await self.page_store.aput_many(thread_id, [], ledger)
        return content, artifact
