"""The I/O of one thread: its page store, its search index, its hooks and its tracing.

The step engine and the recall service yield these requests (and the compute requests of
`langmem_paging.effects`); `ThreadIO` answers them for one thread, sync or async. The async
side never blocks the event loop: the store is awaited, and the index's async methods run
sync indexes in a worker thread. Failures of the store and of the index come back as
`PageStoreError` / `SearchIndexError` (what `on_store_error` is about); a hook's failure is
logged and never fails the turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from langmem_paging.effects import ComputeIO, LoadPages, Request, Reserve
from langmem_paging.errors import PageStoreError, SearchIndexError
from langmem_paging.hooks import PageEvent, PagingHooks
from langmem_paging.records import ClusterNode, Page, page_number
from langmem_paging.search import Hit, SearchIndex
from langmem_paging.state import PagingState
from langmem_paging.store import PageStore

__all__ = ["Commit", "IndexPages", "ListMembers", "LoadClusters", "Notify", "ScoreTexts", "Search", "ThreadIO",
           "Trace"]

logger = logging.getLogger("langmem_paging")


@dataclass
class Commit(Request):
    """Store a step's new records (see `PageStore.commit`). Answer: None."""

    op: ClassVar[str] = "commit"
    pages: list[Page]
    nodes: list[ClusterNode]
    state: PagingState
    stats: list[str]


@dataclass
class IndexPages(Request):
    """Index new pages for search. Answer: None; raises `SearchIndexError`."""

    op: ClassVar[str] = "index_pages"
    pages: list[Page]


@dataclass
class Search(Request):
    """The best passages for a query among the pages `allow` accepts (the index is loaded from the
    store first if it does not hold the thread). Answer: hits, best first."""

    op: ClassVar[str] = "search"
    query: str
    limit: int
    allow: Callable[[str], bool]
    newest: int = 0
    """The branch's highest page number: pages above what the index holds are indexed first."""


@dataclass
class ScoreTexts(Request):
    """BM25 scores of texts still in the context, on the scale of the index's hits (the thread is
    loaded first, as for `Search`). Answer: one score per text."""

    op: ClassVar[str] = "score_texts"
    query: str
    texts: list[str]


@dataclass
class LoadClusters(Request):
    """Stored cluster nodes by id (those that exist). Answer: ``{cluster_id: ClusterNode}``."""

    op: ClassVar[str] = "load_clusters"
    cluster_ids: list[str]


@dataclass
class ListMembers(Request):
    """The member pages of clusters, at most `limit` each. Answer: ``{cluster_id: [page ids]}``."""

    op: ClassVar[str] = "list_members"
    cluster_ids: list[str]
    limit: int


@dataclass
class Notify(Request):
    """Tell hooks about page life events (``formed``, ``evicted``, ``recalled``). Answer: None."""

    op: ClassVar[str] = "notify"
    hooks: Sequence[PagingHooks]
    events: list[tuple[str, PageEvent]]


@dataclass
class Trace(Request):
    """Attach paging metadata to the running graph run (a ``langmem_paging`` custom event). Answer: None."""

    op: ClassVar[str] = "trace"
    data: dict[str, Any] = field(default_factory=dict)


class ThreadIO(ComputeIO):
    """Answers requests for one thread of a page store and a search index."""

    def __init__(self, page_store: PageStore, index: SearchIndex, thread_id: str) -> None:
        self.page_store, self.index, self.thread_id = page_store, index, thread_id

    # -- the store ---------------------------------------------------------------------
    def reserve(self, request: Reserve) -> list[int]:
        return self.page_store.reserve(self.thread_id, request.kind, request.digests, request.state)

    async def areserve(self, request: Reserve) -> list[int]:
        return await self.page_store.areserve(self.thread_id, request.kind, request.digests, request.state)

    def load_pages(self, request: LoadPages) -> dict[str, Page]:
        return self.page_store.get_many(self.thread_id, request.page_ids)

    async def aload_pages(self, request: LoadPages) -> dict[str, Page]:
        return await self.page_store.aget_many(self.thread_id, request.page_ids)

    def load_clusters(self, request: LoadClusters) -> dict[str, ClusterNode]:
        return self.page_store.get_clusters(self.thread_id, request.cluster_ids)

    async def aload_clusters(self, request: LoadClusters) -> dict[str, ClusterNode]:
        return await self.page_store.aget_clusters(self.thread_id, request.cluster_ids)

    def list_members(self, request: ListMembers) -> dict[str, list[str]]:
        return {cid: self.page_store.members(self.thread_id, cid, limit=request.limit) for cid in request.cluster_ids}

    async def alist_members(self, request: ListMembers) -> dict[str, list[str]]:
        return {cid: await self.page_store.amembers(self.thread_id, cid, limit=request.limit)
                for cid in request.cluster_ids}

    def commit(self, request: Commit) -> None:
        self.page_store.commit(self.thread_id, pages=request.pages, nodes=request.nodes, state=request.state,
                               stats=request.stats)

    async def acommit(self, request: Commit) -> None:
        await self.page_store.acommit(self.thread_id, pages=request.pages, nodes=request.nodes,
                                      state=request.state, stats=request.stats)

    # -- the index ---------------------------------------------------------------------
    def index_pages(self, request: IndexPages) -> None:
        try:
            through = self.index.indexed_through(self.thread_id)
            low = min((page_number(p.id) for p in request.pages), default=0)
            gap = self._gap_pages(through, low - 1)
            self.index.add(self.thread_id, [*gap, *request.pages])
        except SearchIndexError:
            raise
        except Exception as error:
            raise _index_failed(error) from error

    async def aindex_pages(self, request: IndexPages) -> None:
        try:
            through = await self.index.aindexed_through(self.thread_id)
            low = min((page_number(p.id) for p in request.pages), default=0)
            gap = await self._agap_pages(through, low - 1)
            await self.index.aadd(self.thread_id, [*gap, *request.pages])
        except SearchIndexError:
            raise
        except Exception as error:
            raise _index_failed(error) from error

    def search(self, request: Search) -> list[Hit]:
        try:
            through = self.index.indexed_through(self.thread_id)
            if through is None:  # a cold start: the index never held this thread
                # a lazy read: the index reads it between its writes, never holding a lock across it
                self.index.load(self.thread_id, self.page_store.scan(self.thread_id))
            elif gap := self._gap_pages(through, request.newest):
                self.index.add(self.thread_id, gap)
            return self.index.search(self.thread_id, request.query, limit=request.limit, allow=request.allow)
        except (SearchIndexError, PageStoreError):
            raise
        except Exception as error:
            raise _index_failed(error) from error

    async def asearch(self, request: Search) -> list[Hit]:
        try:
            through = await self.index.aindexed_through(self.thread_id)
            if through is None:
                await self.index.aload(self.thread_id, await self.page_store.alist_pages(self.thread_id))
            elif gap := await self._agap_pages(through, request.newest):
                await self.index.aadd(self.thread_id, gap)
            return await self.index.asearch(self.thread_id, request.query, limit=request.limit,
                                            allow=request.allow)
        except (SearchIndexError, PageStoreError):
            raise
        except Exception as error:
            raise _index_failed(error) from error

    def _gap_pages(self, through: int | None, upto: int) -> list[Page]:
        """Stored pages numbered above what the index holds up to `upto` (a failed index write's),
        read by key: nothing is read when there is no gap, the usual case."""
        if through is None or upto <= through:
            return []
        try:
            found = self.page_store.get_many(self.thread_id, _page_ids(through + 1, upto))
        except PageStoreError as error:  # the step's own pages wait too: the next step or search retries
            raise _index_failed(error) from error
        return [found[k] for k in sorted(found, key=page_number)]

    async def _agap_pages(self, through: int | None, upto: int) -> list[Page]:
        """Async `_gap_pages`."""
        if through is None or upto <= through:
            return []
        try:
            found = await self.page_store.aget_many(self.thread_id, _page_ids(through + 1, upto))
        except PageStoreError as error:
            raise _index_failed(error) from error
        return [found[k] for k in sorted(found, key=page_number)]

    def score_texts(self, request: ScoreTexts) -> list[float]:
        try:
            return self.index.score(self.thread_id, request.query, request.texts)
        except Exception as error:
            raise _index_failed(error) from error

    async def ascore_texts(self, request: ScoreTexts) -> list[float]:
        try:
            return await self.index.ascore(self.thread_id, request.query, request.texts)
        except Exception as error:
            raise _index_failed(error) from error

    # -- hooks and tracing ---------------------------------------------------------------
    def notify(self, request: Notify) -> None:
        for hook in request.hooks:
            for name, event in request.events:
                try:
                    getattr(hook, f"on_{name}")(event)
                except Exception:  # noqa: BLE001 - a hook never fails the turn
                    logger.exception("paging hook %r failed on %s", hook, name)

    async def anotify(self, request: Notify) -> None:
        for hook in request.hooks:
            for name, event in request.events:
                try:
                    await getattr(hook, f"aon_{name}")(event)
                except Exception:  # noqa: BLE001
                    logger.exception("paging hook %r failed on %s", hook, name)

    def trace(self, request: Trace) -> None:
        from langchain_core.callbacks import dispatch_custom_event

        try:
            dispatch_custom_event("langmem_paging", request.data)
        except RuntimeError:  # not inside a run: nothing to attach it to
            pass

    async def atrace(self, request: Trace) -> None:
        from langchain_core.callbacks import adispatch_custom_event

        try:
            await adispatch_custom_event("langmem_paging", request.data)
        except RuntimeError:
            pass


def _page_ids(first: int, last: int) -> list[str]:
    return [f"p{n}" for n in range(first, last + 1)]


def _index_failed(error: Exception) -> SearchIndexError:
    return SearchIndexError(f"the search index failed: {type(error).__name__}: {error}")
