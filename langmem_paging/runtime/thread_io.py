"""The I/O of one thread: its page store, its search index, its hooks and its tracing.

The step engine and the recall service yield these requests (and the compute requests of
`langmem_paging.core.effects`); `ThreadIO` answers them for one thread, sync or async. The async
side never blocks the event loop: the store is awaited, and the index's async methods run
sync indexes in a worker thread. Failures of the store and of the index come back as
`PageStoreError` / `SearchIndexError` (what `on_store_error` is about); a hook's failure is
logged and never fails the turn.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Generator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from langmem_paging.core.effects import Request, arun, ask, run
from langmem_paging.core.errors import PageStoreError, SearchIndexError
from langmem_paging.core.records import ClusterNode, Page, Reservation, page_number
from langmem_paging.core.state import PagingState, TermSketch
from langmem_paging.core.tracing import apaging_run, paging_run
from langmem_paging.index.base import Hit, SearchIndex
from langmem_paging.recall.io import ListMembers, LoadClusters, RecallIO, ScoreTexts, Search
from langmem_paging.step.io import (
    ComputeIO,
    EntryTerms,
    LoadPages,
    LoadSketch,
    LoadTerms,
    Reserve,
    page_terms,
)
from langmem_paging.storage.claims import Passages
from langmem_paging.storage.lifecycle import Lifecycle
from langmem_paging.storage.page_store import PageStore

__all__ = ["Commit", "IndexPages", "PagingIO", "ReadLifecycle", "ThreadFlow", "ThreadIO", "Trace"]

logger = logging.getLogger("langmem_paging")

T = TypeVar("T")


class PagingIO(RecallIO, Protocol):
    """The handlers of every request a paging flow makes (the step's, the recall service's and the
    engine's), each sync and async: `ThreadIO` implements it for one thread."""

    def commit(self, request: Commit) -> bool: ...

    async def acommit(self, request: Commit) -> bool: ...

    def index_pages(self, request: IndexPages) -> None: ...

    async def aindex_pages(self, request: IndexPages) -> None: ...

    def read_lifecycle(self, request: ReadLifecycle) -> Lifecycle | None: ...

    async def aread_lifecycle(self, request: ReadLifecycle) -> Lifecycle | None: ...

    def trace(self, request: Trace) -> None: ...

    async def atrace(self, request: Trace) -> None: ...


ThreadFlow = Generator[Request[Any, PagingIO], object, T]
"""A flow of the engine's or the recall service's requests (a step's `Flow` runs inside it)."""


@dataclass
class Commit(Request[bool, PagingIO]):
    """Store a step's new records (see `PageStore.commit`), and the thread's keyword sketch with its
    new pages counted (`state.pending_sketch`), in one batch. Answer: whether they were written (False:
    another writer claimed one of their numbers since the step reserved it; nothing was written)."""

    pages: list[Page]
    """The new pages."""
    nodes: list[ClusterNode]
    """The new cluster nodes."""
    state: PagingState
    """The branch's paging state after the step."""
    stats: list[str]
    """Ids of the pages whose access statistics changed."""
    keep_terms: bool = False
    """Keep the shown entries' term maps in the checkpoint (tiers re-score the pages in view from
    them on every call: reading them back would cost a call that pages nothing a store read);
    otherwise the records hold them and a folding step reads them back."""

    def answer(self, io: PagingIO) -> bool:
        return io.commit(self)

    def aanswer(self, io: PagingIO) -> Awaitable[bool]:
        return io.acommit(self)


@dataclass
class IndexPages(Request[None, PagingIO]):
    """Index new pages for search. Answer: None; raises `SearchIndexError`."""

    pages: list[Page]
    """The new pages."""

    def answer(self, io: PagingIO) -> None:
        return io.index_pages(self)

    def aanswer(self, io: PagingIO) -> Awaitable[None]:
        return io.aindex_pages(self)


@dataclass
class ReadLifecycle(Request["Lifecycle | None", PagingIO]):
    """The thread's lifecycle record (`PageStore.get_lifecycle`), read once by each step and each
    search. Answer: the record, or None."""

    def answer(self, io: PagingIO) -> Lifecycle | None:
        return io.read_lifecycle(self)

    def aanswer(self, io: PagingIO) -> Awaitable[Lifecycle | None]:
        return io.aread_lifecycle(self)


@dataclass
class Trace(Request[None, PagingIO]):
    """Attach paging metadata to the running graph run (a ``langmem_paging`` custom event). Answer: None."""

    data: dict[str, Any] = field(default_factory=dict)
    """The metadata."""

    def answer(self, io: PagingIO) -> None:
        return io.trace(self)

    def aanswer(self, io: PagingIO) -> Awaitable[None]:
        return io.atrace(self)


class ThreadIO(ComputeIO, PagingIO):
    """Answers requests for one thread of a page store and a search index."""

    def __init__(self, page_store: PageStore, index: SearchIndex, thread_id: str) -> None:
        self.page_store, self.index, self.thread_id = page_store, index, thread_id

    # -- the store ---------------------------------------------------------------------
    def reserve(self, request: Reserve) -> Reservation:
        return self.page_store.reserve(self.thread_id, request.kind, request.digests, request.state)

    async def areserve(self, request: Reserve) -> Reservation:
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
        return {
            cid: self.page_store.members(self.thread_id, cid, limit=request.limit)
            for cid in request.cluster_ids
        }

    async def alist_members(self, request: ListMembers) -> dict[str, list[str]]:
        return {
            cid: await self.page_store.amembers(self.thread_id, cid, limit=request.limit)
            for cid in request.cluster_ids
        }

    def read_lifecycle(self, request: ReadLifecycle) -> Lifecycle | None:
        return self.page_store.get_lifecycle(self.thread_id)

    async def aread_lifecycle(self, request: ReadLifecycle) -> Lifecycle | None:
        return await self.page_store.aget_lifecycle(self.thread_id)

    def load_sketch(self, request: LoadSketch) -> TermSketch:
        return self.page_store.get_sketch(self.thread_id) or request.state.carried_sketch()

    async def aload_sketch(self, request: LoadSketch) -> TermSketch:
        return await self.page_store.aget_sketch(self.thread_id) or request.state.carried_sketch()

    def load_terms(self, request: LoadTerms) -> EntryTerms:
        pages = self.page_store.get_many(self.thread_id, request.page_ids) if request.page_ids else {}
        nodes = (
            self.page_store.get_clusters(self.thread_id, request.cluster_ids) if request.cluster_ids else {}
        )
        return _entry_terms(pages, nodes)

    async def aload_terms(self, request: LoadTerms) -> EntryTerms:
        pages = await self.page_store.aget_many(self.thread_id, request.page_ids) if request.page_ids else {}
        nodes = (
            await self.page_store.aget_clusters(self.thread_id, request.cluster_ids)
            if request.cluster_ids
            else {}
        )
        return _entry_terms(pages, nodes)

    def commit(self, request: Commit) -> bool:
        return run(_commit(request, self.page_store.indexes_with_records(self.index)), self)

    async def acommit(self, request: Commit) -> bool:
        return await arun(_commit(request, self.page_store.indexes_with_records(self.index)), self)

    # -- the index ---------------------------------------------------------------------
    def index_pages(self, request: IndexPages) -> None:
        if self.page_store.indexes_with_records(self.index):
            return None  # written with the records (`commit`)
        return run(_index_pages(request), self)

    async def aindex_pages(self, request: IndexPages) -> None:
        if self.page_store.indexes_with_records(self.index):
            return None
        return await arun(_index_pages(request), self)

    def search(self, request: Search) -> list[Hit]:
        return run(_search(request), self)

    async def asearch(self, request: Search) -> list[Hit]:
        return await arun(_search(request), self)

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

    # -- tracing (hooks: `PagingIO.notify`) -----------------------------------------------
    def trace(self, request: Trace) -> None:
        from langchain_core.callbacks import dispatch_custom_event

        paging_run(request.data)
        try:
            dispatch_custom_event("langmem_paging", request.data)
        except RuntimeError:  # not inside a run: nothing to attach it to
            pass

    async def atrace(self, request: Trace) -> None:
        from langchain_core.callbacks import adispatch_custom_event

        await apaging_run(request.data)
        try:
            await adispatch_custom_event("langmem_paging", request.data)
        except RuntimeError:
            pass


def _stored_sketch(state: PagingState) -> TermSketch | None:
    """The sketch a commit writes: the one the step counted its pages into, unless it travels in
    the state."""
    sketch = state.pending_sketch
    return None if sketch is None or sketch.checkpointed else sketch


def _entry_terms(pages: dict[str, Page], nodes: dict[str, ClusterNode]) -> EntryTerms:
    return EntryTerms(page_terms(pages), {cid: node.terms for cid, node in nodes.items()})


def _index_failed(error: Exception) -> SearchIndexError:
    return SearchIndexError(f"the search index failed: {type(error).__name__}: {error}")


# -- one source for the reads of a search and of an index write, sync or async -----------------
# Each is a flow of the reads below, driven by `run` or `arun` over the `ThreadIO` itself:
# both sides read the same things in the same order, and only the call to the store or the
# index differs (each read's `answer` / `aanswer`).

_Reads = Generator[Request[Any, ThreadIO], object, T]
"""A flow of reads of one thread's store and index."""


def _commit(request: Commit, with_passages: bool) -> _Reads[bool]:
    """A step's records, and its passages in their transaction where the index writes there
    (`PageStore.indexes_with_records`): one durable commit per store."""
    request.state.terms_stored = not request.keep_terms  # else the records hold them
    passages = (yield from _with_gap(request.pages)) if with_passages and request.pages else None
    return (yield from ask(_Write(request, passages)))


def _index_pages(request: IndexPages) -> _Reads[None]:
    pages = yield from _with_gap(request.pages)
    try:
        yield from ask(_Index(pages))
    except Exception as error:
        raise _index_failed(error) from error


def _with_gap(pages: list[Page]) -> _Reads[list[Page]]:
    """`pages`, after the stored pages between what the index holds and them (the gap a failed
    index write left): what an index write gives the index."""
    try:
        through = yield from ask(_IndexedThrough())
    except Exception as error:
        raise _index_failed(error) from error
    low = min((page_number(p.id) for p in pages), default=0)
    gap = yield from _gap_pages(through, low - 1)
    return [*gap, *pages]


def _search(request: Search) -> _Reads[list[Hit]]:
    try:
        lifecycle = yield from ask(ReadLifecycle())  # a forget or delete elsewhere: reload from the records
        yield from ask(_Follow(lifecycle.generation if lifecycle is not None else None))
        through = yield from ask(_IndexedThrough())
        if through is None:  # a cold start: the index never held this thread
            # every page is read before the index is written: no index lock is held across a store read
            pages = yield from ask(_ReadPages())
            yield from ask(_Index(pages, load=True))
        elif gap := (yield from _gap_pages(through, request.newest)):
            yield from ask(_Index(gap))
        return (yield from ask(_Find(request)))
    except (SearchIndexError, PageStoreError):
        raise
    except Exception as error:
        raise _index_failed(error) from error


def _gap_pages(through: int | None, upto: int) -> _Reads[list[Page]]:
    """Stored pages numbered above what the index holds up to `upto` (a failed index write's),
    read by key: nothing is read when there is no gap, the usual case."""
    if through is None or upto <= through:
        return []
    try:
        found = yield from ask(LoadPages([f"p{n}" for n in range(through + 1, upto + 1)]))
    except PageStoreError as error:  # the step's own pages wait too: the next step or search retries
        raise _index_failed(error) from error
    return [found[k] for k in sorted(found, key=page_number)]


@dataclass
class _Write(Request[bool, ThreadIO]):
    """A step's commit (`PageStore.commit`), with the passages of `pages` when given."""

    commit: Commit
    """What the step made."""
    pages: list[Page] | None
    """The pages to index in the commit's transaction (None: the index is written after it)."""

    def answer(self, io: ThreadIO) -> bool:
        return io.page_store.commit(io.thread_id, **self._arguments(io))

    def aanswer(self, io: ThreadIO) -> Awaitable[bool]:
        return io.page_store.acommit(io.thread_id, **self._arguments(io))

    def _arguments(self, io: ThreadIO) -> dict[str, Any]:
        request = self.commit
        return {
            "pages": request.pages,
            "nodes": request.nodes,
            "state": request.state,
            "stats": request.stats,
            "sketch": _stored_sketch(request.state),
            "passages": Passages(io.index, self.pages) if self.pages is not None else None,
        }


@dataclass
class _Follow(Request[None, ThreadIO]):
    """Tell the index the thread's lifecycle generation (`SearchIndex.follow`)."""

    generation: str | None
    """The store's (None: no record)."""

    def answer(self, io: ThreadIO) -> None:
        io.index.follow(io.thread_id, self.generation)

    async def aanswer(self, io: ThreadIO) -> None:
        io.index.follow(io.thread_id, self.generation)


@dataclass
class _IndexedThrough(Request["int | None", ThreadIO]):
    """The highest page number up to which the index holds every page of the thread (None: not
    the thread)."""

    def answer(self, io: ThreadIO) -> int | None:
        return io.index.indexed_through(io.thread_id)

    def aanswer(self, io: ThreadIO) -> Awaitable[int | None]:
        return io.index.aindexed_through(io.thread_id)


@dataclass
class _ReadPages(Request[list[Page], ThreadIO]):
    """Every stored page of the thread."""

    def answer(self, io: ThreadIO) -> list[Page]:
        return io.page_store.list_pages(io.thread_id)

    def aanswer(self, io: ThreadIO) -> Awaitable[list[Page]]:
        return io.page_store.alist_pages(io.thread_id)


@dataclass
class _Index(Request[None, ThreadIO]):
    """Index pages of a thread the index holds (those already indexed are skipped), or (`load`: a
    cold load) every stored page of the thread."""

    pages: list[Page]
    load: bool = False

    def answer(self, io: ThreadIO) -> None:
        return (io.index.load if self.load else io.index.add)(io.thread_id, self.pages)

    def aanswer(self, io: ThreadIO) -> Awaitable[None]:
        return (io.index.aload if self.load else io.index.aadd)(io.thread_id, self.pages)


@dataclass
class _Find(Request[list[Hit], ThreadIO]):
    """The index's hits for a search."""

    search: Search
    """What is searched."""

    def answer(self, io: ThreadIO) -> list[Hit]:
        return io.index.search(
            io.thread_id, self.search.query, limit=self.search.limit, allow=self.search.allow
        )

    def aanswer(self, io: ThreadIO) -> Awaitable[list[Hit]]:
        return io.index.asearch(
            io.thread_id, self.search.query, limit=self.search.limit, allow=self.search.allow
        )
