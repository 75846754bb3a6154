"""PageStore: evicted pages and the paging ledger, over any LangGraph `BaseStore`.

Keys are namespaced per thread, built in one place (`thread_namespace`), so a
thread can only ever read its own pages. Sync and async differ only at the
store call (`batch` vs `abatch`).
"""

from __future__ import annotations

import asyncio
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langgraph.store.base import BaseStore, GetOp, Op, PutOp, SearchOp
from rank_bm25 import BM25Okapi

from langmem_paging.records import Ledger, Page, page_number
from langmem_paging.recall_text import render_message
from langmem_paging.text import content_terms

__all__ = ["NAMESPACE_ROOT", "PageStore", "thread_namespace"]

NAMESPACE_ROOT = "langmem_paging"
_LEDGER_KEY = "ledger"
_LIST_BATCH = 100


def thread_namespace(thread_id: str, kind: Literal["pages", "ledger"]) -> tuple[str, str, str]:
    """``("langmem_paging", <thread>, kind)``. Dots are escaped: LangGraph labels may not hold them."""
    if not isinstance(thread_id, str) or not thread_id:
        raise ValueError(
            "Paging needs a non-empty `thread_id`: pass config={'configurable': {'thread_id': ...}}."
        )
    return (NAMESPACE_ROOT, thread_id.replace("%", "%25").replace(".", "%2E"), kind)


@dataclass
class _ThreadIndex:
    """BM25 over one thread's pages, extended as pages arrive (pages never change)."""

    page_ids: list[str] = field(default_factory=list)
    corpus: list[list[str]] = field(default_factory=list)
    bm25: BM25Okapi | None = None


class PageStore:
    """Pages of every thread, over a LangGraph store.

    Args:
        store: Any `BaseStore` (InMemoryStore, SqliteStore, PostgresStore, ...). When
            None, the middleware binds the graph's store at first use, or an
            in-memory store with a warning.

    Example:
        >>> from langgraph.store.memory import InMemoryStore
        >>> from langchain_core.messages import HumanMessage
        >>> pages = PageStore(InMemoryStore())
        >>> page = Page(id="p1", messages=[HumanMessage("hi", id="m1")], bookmark="[p1:hi]",
        ...             keywords=["hi"], token_count=4, boundary="fixed_20", created_turn=1)
        >>> pages.put("thread-1", page)
        >>> pages.get("thread-1", "p1").messages[0].content
        'hi'
        >>> pages.get("thread-2", "p1") is None
        True
    """

    def __init__(self, store: BaseStore | None = None) -> None:
        self.store = store
        self._indexes: dict[str, _ThreadIndex] = {}
        self._lock = threading.Lock()

    # -- binding -------------------------------------------------------------------
    def bind(self, store: BaseStore | None) -> None:
        """Use `store` if none was given; with neither, keep pages in memory (and say so once)."""
        if self.store is not None:
            return
        if store is None:
            from langgraph.store.memory import InMemoryStore

            warnings.warn(
                "langmem-paging: no store given to the middleware or the graph; evicted pages "
                "live only in this process's memory and are lost when it exits. Pass "
                "store=SqliteStore(...) (or any LangGraph store) to keep them.",
                RuntimeWarning,
                stacklevel=3,
            )
            store = InMemoryStore()
        self.store = store

    def _backend(self) -> BaseStore:
        if self.store is None:
            raise ValueError("PageStore has no store: pass `store=` or run inside a graph with a store.")
        return self.store

    # -- the only I/O: batch / abatch ----------------------------------------------
    def _batch(self, ops: Sequence[Op]) -> list[Any]:
        return self._backend().batch(ops)

    async def _abatch(self, ops: Sequence[Op]) -> list[Any]:
        store = self._backend()
        try:
            return await store.abatch(ops)
        except NotImplementedError:  # e.g. the sync SqliteStore: run it in a worker thread
            return await asyncio.to_thread(store.batch, ops)

    # -- op builders and decoders, shared by sync and async --------------------------
    @staticmethod
    def _get_ops(thread_id: str, page_id: str) -> list[Op]:
        return [
            GetOp(thread_namespace(thread_id, "pages"), page_id),
            GetOp(thread_namespace(thread_id, "ledger"), _LEDGER_KEY),
        ]

    @staticmethod
    def _ledger(item) -> Ledger | None:
        return None if item is None else Ledger.from_dict(item.value)

    @staticmethod
    def _page(item, ledger: Ledger | None) -> Page | None:
        """Decode a stored page; access statistics come from the ledger (they change on recall)."""
        if item is None:
            return None
        page = Page.from_dict(item.value)
        entry = ledger.entry(page.id) if ledger is not None else None
        if entry is not None:
            page.access_count, page.last_access = entry.access_count, entry.last_access
        return page

    @staticmethod
    def _list_op(thread_id: str, offset: int) -> SearchOp:
        return SearchOp(thread_namespace(thread_id, "pages"), limit=_LIST_BATCH, offset=offset)

    @staticmethod
    def _put_op(thread_id: str, page: Page) -> PutOp:
        return PutOp(thread_namespace(thread_id, "pages"), page.id, page.to_dict(), index=False)

    @staticmethod
    def _ledger_op(thread_id: str, ledger: Ledger) -> PutOp:
        return PutOp(thread_namespace(thread_id, "ledger"), _LEDGER_KEY, ledger.to_dict(), index=False)

    @staticmethod
    def _valid(page_id: str) -> bool:
        try:
            page_number(page_id)
        except ValueError:
            return False
        return True

    def _snapshot(self, items, ledger_item) -> tuple[list[Page], Ledger | None]:
        ledger = self._ledger(ledger_item)
        pages = sorted((self._page(item, ledger) for item in items), key=lambda p: page_number(p.id))
        return pages, ledger

    # -- sync API --------------------------------------------------------------------
    def get(self, thread_id: str, page_id: str) -> Page | None:
        """The page, or None if this thread has no such page (or the id is malformed)."""
        if not self._valid(page_id):
            return None
        item, ledger_item = self._batch(self._get_ops(thread_id, page_id))
        return self._page(item, self._ledger(ledger_item))

    def list(self, thread_id: str) -> list[Page]:
        """All pages of a thread, in page order."""
        return self.snapshot(thread_id)[0]

    def snapshot(self, thread_id: str) -> tuple[list[Page], Ledger | None]:
        """All pages of a thread in page order, and its ledger, read together."""
        items = []
        while True:
            batch = self._batch([self._list_op(thread_id, len(items))])[0]
            items.extend(batch)
            if len(batch) < _LIST_BATCH:
                break
        (ledger_item,) = self._batch([GetOp(thread_namespace(thread_id, "ledger"), _LEDGER_KEY)])
        return self._snapshot(items, ledger_item)

    def put(self, thread_id: str, page: Page) -> None:
        """Write one page."""
        self._batch([self._put_op(thread_id, page)])

    def put_many(self, thread_id: str, pages: Sequence[Page], ledger: Ledger | None = None) -> None:
        """Write pages first, then the ledger that points at them (a crash in between loses nothing)."""
        if pages:
            self._batch([self._put_op(thread_id, p) for p in pages])
        if ledger is not None:
            self._batch([self._ledger_op(thread_id, ledger)])

    def get_ledger(self, thread_id: str) -> Ledger | None:
        """The thread's paging ledger, or None for a new thread."""
        (item,) = self._batch([GetOp(thread_namespace(thread_id, "ledger"), _LEDGER_KEY)])
        return self._ledger(item)

    def search(self, thread_id: str, query: str, k: int = 3) -> list[Page]:
        """Pages ranked by BM25 against `query`; only pages sharing a term with it."""
        return self.rank(thread_id, self.list(thread_id), query, k)

    # -- async API -------------------------------------------------------------------
    async def aget(self, thread_id: str, page_id: str) -> Page | None:
        """Async `get`."""
        if not self._valid(page_id):
            return None
        item, ledger_item = await self._abatch(self._get_ops(thread_id, page_id))
        return self._page(item, self._ledger(ledger_item))

    async def alist(self, thread_id: str) -> list[Page]:
        """Async `list`."""
        return (await self.asnapshot(thread_id))[0]

    async def asnapshot(self, thread_id: str) -> tuple[list[Page], Ledger | None]:
        """Async `snapshot`."""
        items = []
        while True:
            batch = (await self._abatch([self._list_op(thread_id, len(items))]))[0]
            items.extend(batch)
            if len(batch) < _LIST_BATCH:
                break
        (ledger_item,) = await self._abatch([GetOp(thread_namespace(thread_id, "ledger"), _LEDGER_KEY)])
        return self._snapshot(items, ledger_item)

    async def aput(self, thread_id: str, page: Page) -> None:
        """Async `put`."""
        await self._abatch([self._put_op(thread_id, page)])

    async def aput_many(self, thread_id: str, pages: Sequence[Page], ledger: Ledger | None = None) -> None:
        """Async `put_many`."""
        if pages:
            await self._abatch([self._put_op(thread_id, p) for p in pages])
        if ledger is not None:
            await self._abatch([self._ledger_op(thread_id, ledger)])

    async def aget_ledger(self, thread_id: str) -> Ledger | None:
        """Async `get_ledger`."""
        (item,) = await self._abatch([GetOp(thread_namespace(thread_id, "ledger"), _LEDGER_KEY)])
        return self._ledger(item)

    async def asearch(self, thread_id: str, query: str, k: int = 3) -> list[Page]:
        """Async `search`."""
        return self.rank(thread_id, await self.alist(thread_id), query, k)

    # -- lexical search (no LangGraph store has BM25) ----------------------------------
    def rank(self, thread_id: str, pages: list[Page], query: str, k: int) -> list[Page]:
        """The `k` best of `pages` for `query` by BM25, from an index kept per thread."""
        with self._lock:
            index = self._indexes.setdefault(thread_id, _ThreadIndex())
            known = set(index.page_ids)
            fresh = [p for p in pages if p.id not in known]
            for page in fresh:
                index.page_ids.append(page.id)
                index.corpus.append(content_terms("\n".join(render_message(m) for m in page.messages)))
            if fresh or index.bm25 is None:
                # Tokenized pages are kept; only BM25's corpus statistics are recomputed.
                index.bm25 = BM25Okapi(index.corpus) if index.corpus else None
            if index.bm25 is None:
                return []
            terms = content_terms(query)
            scores = index.bm25.get_scores(terms) if terms else []
            by_id = {p.id: p for p in pages}
            ranked = sorted(
                (
                    (score, page_number(pid))
                    for pid, score, doc in zip(index.page_ids, scores, index.corpus)
                    if set(terms) & set(doc) and pid in by_id
                ),
                key=lambda sn: (-sn[0], sn[1]),
            )
            return [by_id[f"p{n}"] for _, n in ranked[:k]]
