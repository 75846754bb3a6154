"""PageStore: pages and the cluster forest of every thread, over any LangGraph `BaseStore`.

Keys are namespaced per thread, built in one place (`thread_namespace`), so a thread
can only ever read its own pages. Records are written once and never rewritten (but by
`forget`): a page or cluster number is handed out only if no record with different content
holds it (`reserve`; a record holding the same messages comes back with its number, to be
taken as stored), `commit` writes no record twice, and a per-thread high-water mark makes
forks and time travel skip numbers other branches took. Every operation is written once, as
a generator of store batches; the sync methods run it with `batch`, the async ones with
`abatch` (nothing else differs). Failed calls are retried, then raise `PageStoreError`;
every write is idempotent, so a retried or repeated step leaves the same records.

Namespaces under ``("langmem_paging", <thread>)``:

- ``pages``: `Page` records by page id (``p3``), written when the page forms;
- ``clusters``: `ClusterNode` records by cluster id (``c2``), written when made;
- ``parents``: for a page or cluster id, the clusters that joined it (union-find pointers);
- ``stats``: access counts mirrored from the checkpoint for operators;
- ``meta``: the high-water mark of page and cluster numbers (``next``), the thread's keyword
  sketch (``sketch``, `langmem_paging.core.sketch`), written with the pages it counts, and its
  lifecycle record (``lifecycle``, `langmem_paging.storage.lifecycle.Lifecycle`): written with the
  thread's first pages or its first forget, given a new generation by every forget.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, SearchOp

from langmem_paging.core.effects import adrive, drive
from langmem_paging.core.errors import LifecycleChanged, PageStoreError
from langmem_paging.core.forest import walk_members, walk_root
from langmem_paging.core.records import ClusterNode, Page, Reservation, cluster_number, is_id, page_number
from langmem_paging.core.state import PagingState, TermSketch
from langmem_paging.index.base import SearchIndex
from langmem_paging.index.defaults import store_indexes
from langmem_paging.storage.claims import ClaimedWrite, Guard, NumberClaims, Passages, claims_for
from langmem_paging.storage.lifecycle import (
    FORGOTTEN,
    Forgotten,
    Lifecycle,
    forget_in_records,
    forget_in_sketch,
    forgotten,
)
from langmem_paging.storage.postgres_reads import abatch_reads, batch_reads

__all__ = [
    "FORGOTTEN",
    "KINDS",
    "NAMESPACE_ROOT",
    "PageStore",
    "PageStoreError",
    "abatch_any",
    "forgotten",
    "thread_namespace",
]

logger = logging.getLogger("langmem_paging")

T = TypeVar("T")


@dataclass(frozen=True)
class Claimed:
    """A request of a store operation: the digests holding `numbers` of `kind` on a thread
    (`langmem_paging.storage.claims`, a read); answered with ``[{number: digest}]``."""

    thread_id: str
    kind: str
    numbers: list[int]


Batches = Generator["Sequence[Op] | Claimed | ClaimedWrite", list[Any], T]
"""An operation written once: it yields store batches and receives their results."""

NAMESPACE_ROOT = "langmem_paging"
Kind = Literal["pages", "clusters", "parents", "stats", "meta"]
KINDS: tuple[Kind, ...] = ("pages", "clusters", "parents", "stats", "meta")
_LIST_BATCH = 200
_NEXT_KEY = "next"
_SKETCH_KEY = "sketch"
_LIFECYCLE_KEY = "lifecycle"
_MISUSE = (asyncio.InvalidStateError,)
"""Errors of how the store is called, not failures of the store: raised as they are, never retried
(a sync call to an `AsyncPostgresStore` on its own event loop)."""


async def abatch_any(store: BaseStore, ops: Sequence[Op]) -> list[Any]:
    """``await store.abatch(ops)``, or ``store.batch(ops)`` in a worker thread for a store with no
    async implementation (the sync `SqliteStore` raises NotImplementedError)."""
    try:
        return await store.abatch(ops)
    except NotImplementedError:
        return await asyncio.to_thread(store.batch, ops)


def thread_namespace(thread_id: str, kind: Kind) -> tuple[str, str, str]:
    """``("langmem_paging", <thread>, kind)``. Dots are escaped: LangGraph labels may not hold them."""
    if not isinstance(thread_id, str) or not thread_id:
        raise ValueError(
            "Paging needs a non-empty `thread_id`: pass config={'configurable': {'thread_id': ...}}."
        )
    return (NAMESPACE_ROOT, thread_id.replace("%", "%25").replace(".", "%2E"), kind)


class PageStore:
    """Pages of every thread, over a LangGraph store.

    A thin view: it holds the store and how to call it, nothing per thread or per call, so
    making one per call is cheap (the middleware does, over the graph's store of that call).

    Args:
        store: Any `BaseStore` (InMemoryStore, SqliteStore, PostgresStore, ...).
        ttl: Minutes after which the store may expire a thread's records (stores that
            support TTL, e.g. `SqliteStore`/`PostgresStore` with a TTL sweeper); None keeps
            them until `delete_thread`.
        retries: How many times a failed store call is retried (with a short backoff)
            before `PageStoreError` reaches the caller.

    Raises:
        TypeError: `store` is not a LangGraph `BaseStore`.
        ValueError: `ttl` is not positive, or the store has no TTL support.

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

    def __init__(self, store: BaseStore, *, ttl: float | None = None, retries: int = 2) -> None:
        if not isinstance(store, BaseStore):
            raise TypeError(
                f"`store` must be a LangGraph BaseStore (InMemoryStore, SqliteStore, PostgresStore, ...); "
                f"got {type(store).__name__}."
            )
        if ttl is not None and ttl <= 0:
            raise ValueError("`ttl` must be a positive number of minutes, or None.")
        if ttl is not None and not getattr(store, "supports_ttl", False):
            raise ValueError(
                f"`ttl` needs a store with TTL support ({type(store).__name__} has none): use SqliteStore, "
                "PostgresStore (with a TTL sweeper), or drop `ttl` and call `delete_thread` instead."
            )
        self.store = store
        self.ttl = ttl
        self.retries = retries

    # -- the only I/O: batch / abatch, retried ----------------------------------------
    def _batch(self, ops: Sequence[Op] | Claimed | ClaimedWrite) -> list[Any]:
        if isinstance(ops, Claimed):
            return self._claim(lambda claims: [claims.held(ops.thread_id, ops.kind, ops.numbers)])
        if isinstance(ops, ClaimedWrite):
            return self._claim(lambda claims: [claims.write(ops, self._batch)])
        if not ops:
            return []
        for attempt in range(self.retries + 1):
            try:
                return batch_reads(self.store, ops) or self.store.batch(ops)
            except _MISUSE:
                raise
            except Exception as error:  # noqa: BLE001 - any backend error is retried, then reported
                time.sleep(self._backoff(attempt, error))
        raise AssertionError("unreachable")

    async def _abatch(self, ops: Sequence[Op] | Claimed | ClaimedWrite) -> list[Any]:
        if isinstance(ops, (Claimed, ClaimedWrite)):
            try:
                claims = claims_for(self.store)
                if isinstance(ops, Claimed):
                    return [await claims.aheld(ops.thread_id, ops.kind, ops.numbers)]
                return [await claims.awrite(ops, self._abatch)]
            except PageStoreError:
                raise
            except Exception as error:  # noqa: BLE001 - the claims live in the store's database
                raise self._failed(error) from error
        if not ops:
            return []
        for attempt in range(self.retries + 1):
            try:
                return await abatch_reads(self.store, ops) or await abatch_any(self.store, ops)
            except _MISUSE:
                raise
            except Exception as error:  # noqa: BLE001
                await asyncio.sleep(self._backoff(attempt, error))
        raise AssertionError("unreachable")

    def _backoff(self, attempt: int, error: Exception) -> float:
        """Seconds to wait before retrying after `error` on 0-based `attempt`, or `PageStoreError`
        when the retries are spent: the retry rule's one home, for `_batch` and `_abatch`.

        Hand-written rather than tenacity's `Retrying`: measured 5-13x its overhead on the common
        (succeeding) call and 6-15x on a retried one (tools/bench_libraries.py), for the same attempts.
        """
        if attempt >= self.retries:
            raise self._failed(error) from error
        logger.warning("page store call failed (%s: %s); retrying", type(error).__name__, error)
        return 0.01 * 2.0**attempt

    def _claim(self, call: Callable[[NumberClaims], list[Any]]) -> list[Any]:
        try:
            return call(claims_for(self.store))
        except PageStoreError:
            raise
        except Exception as error:  # noqa: BLE001 - the claims live in the store's database
            raise self._failed(error) from error

    def _failed(self, error: Exception) -> PageStoreError:
        tries = f" after {self.retries} retries" if self.retries else ""
        return PageStoreError(
            f"the page store ({type(self.store).__name__}) failed{tries}: {type(error).__name__}: {error}"
        )

    def _run(self, operation: Batches[T]) -> T:
        return drive(operation, self._batch)

    async def _arun(self, operation: Batches[T]) -> T:
        return await adrive(operation, self._abatch)

    def _put(self, thread_id: str, kind: Kind, key: str, value: dict[str, Any] | None) -> PutOp:
        return PutOp(
            thread_namespace(thread_id, kind),
            key,
            value,
            index=False,
            ttl=self._ttl() if value is not None else None,
        )

    def _ttl(self) -> float | None:
        """`ttl`, else the store's own default (``ttl={"default_ttl": ...}``), else None: never expire."""
        if self.ttl is not None:
            return self.ttl
        config = getattr(self.store, "ttl_config", None) or {}
        return config.get("default_ttl")

    # -- reads ---------------------------------------------------------------------------
    def get(self, thread_id: str, page_id: str) -> Page | None:
        """The page, or None if this thread has no such page (or the id is malformed)."""
        return self.get_many(thread_id, [page_id]).get(page_id)

    async def aget(self, thread_id: str, page_id: str) -> Page | None:
        """Async `get`."""
        return (await self.aget_many(thread_id, [page_id])).get(page_id)

    def get_many(self, thread_id: str, page_ids: Iterable[str]) -> dict[str, Page]:
        """The pages that exist among `page_ids`, by id, in one store call."""
        return self._run(self._get_many(thread_id, page_ids))

    async def aget_many(self, thread_id: str, page_ids: Iterable[str]) -> dict[str, Page]:
        """Async `get_many`."""
        return await self._arun(self._get_many(thread_id, page_ids))

    def _get_many(self, thread_id: str, page_ids: Iterable[str]) -> Batches[dict[str, Page]]:
        ids = [p for p in dict.fromkeys(page_ids) if is_id(p, page_number)]
        ops: list[Op] = []
        for page_id in ids:
            ops += [
                GetOp(thread_namespace(thread_id, "pages"), page_id),
                GetOp(thread_namespace(thread_id, "stats"), page_id),
            ]
        items = yield ops
        pages = {pid: _page(items[2 * k], items[2 * k + 1]) for k, pid in enumerate(ids)}
        return {pid: page for pid, page in pages.items() if page is not None}

    def get_cluster(self, thread_id: str, cluster_id: str) -> ClusterNode | None:
        """A cluster node, or None."""
        return self.get_clusters(thread_id, [cluster_id]).get(cluster_id)

    def get_clusters(self, thread_id: str, cluster_ids: Iterable[str]) -> dict[str, ClusterNode]:
        """The cluster nodes that exist among `cluster_ids`, in one store call."""
        return self._run(self._get_clusters(thread_id, cluster_ids))

    async def aget_clusters(self, thread_id: str, cluster_ids: Iterable[str]) -> dict[str, ClusterNode]:
        """Async `get_clusters`."""
        return await self._arun(self._get_clusters(thread_id, cluster_ids))

    def _get_clusters(self, thread_id: str, cluster_ids: Iterable[str]) -> Batches[dict[str, ClusterNode]]:
        ids = [c for c in dict.fromkeys(cluster_ids) if is_id(c, cluster_number)]
        items = yield [GetOp(thread_namespace(thread_id, "clusters"), c) for c in ids]
        return {
            c: ClusterNode.from_dict(it.value) for c, it in zip(ids, items, strict=True) if it is not None
        }

    def list_items(self, thread_id: str, kind: Kind) -> list[Item]:
        """Every record of one kind of a thread, as the store holds it (paged through the store)."""
        return self._run(self._list_items(thread_id, kind))

    async def alist_items(self, thread_id: str, kind: Kind) -> list[Item]:
        """Async `list_items`."""
        return await self._arun(self._list_items(thread_id, kind))

    def _list_items(self, thread_id: str, kind: Kind) -> Batches[list[Item]]:
        items: list[Item] = []
        while True:
            (batch,) = yield [
                SearchOp(thread_namespace(thread_id, kind), limit=_LIST_BATCH, offset=len(items))
            ]
            items.extend(batch)
            if len(batch) < _LIST_BATCH:
                return items

    def get_sketch(self, thread_id: str) -> TermSketch | None:
        """The thread's keyword sketch, or None if it has none yet (one read)."""
        return self._run(self._get_sketch(thread_id))

    async def aget_sketch(self, thread_id: str) -> TermSketch | None:
        """Async `get_sketch`."""
        return await self._arun(self._get_sketch(thread_id))

    def _get_sketch(self, thread_id: str) -> Batches[TermSketch | None]:
        (item,) = yield [GetOp(thread_namespace(thread_id, "meta"), _SKETCH_KEY)]
        return TermSketch.from_record(item.value) if item is not None else None

    def get_lifecycle(self, thread_id: str) -> Lifecycle | None:
        """The thread's lifecycle record, or None (no pages, or none since the record came; one read)."""
        return self._run(self._get_lifecycle(thread_id))

    async def aget_lifecycle(self, thread_id: str) -> Lifecycle | None:
        """Async `get_lifecycle`."""
        return await self._arun(self._get_lifecycle(thread_id))

    def _get_lifecycle(self, thread_id: str) -> Batches[Lifecycle | None]:
        (item,) = yield [GetOp(thread_namespace(thread_id, "meta"), _LIFECYCLE_KEY)]
        return Lifecycle.from_record(item.value) if item is not None else None

    def _high_water(self, thread_id: str) -> Batches[int | None]:
        (item,) = yield [GetOp(thread_namespace(thread_id, "meta"), _NEXT_KEY)]
        return item.value.get("p", 1) if item is not None else None

    def _listed_pages(self, thread_id: str) -> Batches[list[Page]]:
        """Pages written with `put` alone (no high-water mark): listed instead of read by key."""
        items = yield from self._list_items(thread_id, "pages")
        stats = yield from self._list_items(thread_id, "stats")
        by_key = {it.key: it for it in stats}
        pages = [p for it in items if (p := _page(it, by_key.get(it.key))) is not None]
        return sorted(pages, key=lambda p: page_number(p.id))

    def scan(self, thread_id: str, *, chunk: int = 500) -> Iterator[Page]:
        """Every page of a thread (every branch), in page order, read by key in chunks up to the
        high-water mark: linear in the pages, for operators and index rebuilds, never on a turn's
        path."""
        for read in self._run(self._scan(thread_id, chunk)):
            yield from self._run(read)

    async def ascan(self, thread_id: str, *, chunk: int = 500) -> AsyncIterator[Page]:
        """Async `scan`."""
        for read in await self._arun(self._scan(thread_id, chunk)):
            for page in await self._arun(read):
                yield page

    def _scan(self, thread_id: str, chunk: int) -> Batches[Iterator[Batches[list[Page]]]]:
        """The reads of `scan`, one a chunk, each run when the pages before it were taken."""
        high = yield from self._high_water(thread_id)
        if high is None:
            return iter([self._listed_pages(thread_id)])
        return (self._in_order(thread_id, ids) for ids in _chunks(high, chunk))

    def _in_order(self, thread_id: str, page_ids: list[str]) -> Batches[list[Page]]:
        found = yield from self._get_many(thread_id, page_ids)
        return [found[k] for k in sorted(found, key=page_number)]

    def list_pages(self, thread_id: str) -> list[Page]:
        """All pages of a thread (every branch), in page order (see `scan`)."""
        return list(self.scan(thread_id))

    async def alist_pages(self, thread_id: str) -> list[Page]:
        """Async `list_pages`."""
        return [page async for page in self.ascan(thread_id)]

    def list_clusters(self, thread_id: str) -> list[ClusterNode]:
        """All cluster nodes of a thread (every branch), in id order."""
        nodes = [ClusterNode.from_dict(it.value) for it in self.list_items(thread_id, "clusters")]
        return sorted(nodes, key=lambda n: cluster_number(n.id))

    # -- the union-find forest -----------------------------------------------------------
    def find(
        self, thread_id: str, ident: str, *, state: PagingState | dict[str, Any] | None = None
    ) -> str | None:
        """The cluster root holding a page (or cluster), or None if it is in no cluster.

        With `state` (a branch's paging state) the answer is exact for that branch: only
        clusters the branch made count, and its current roots end the walk. Without it, the
        newest cluster at each level is followed (the most recent branch). Shortcuts found
        on the way are stored (path compression), so later finds take one step.
        """
        return self._run(self._find(thread_id, ident, state))

    async def afind(
        self, thread_id: str, ident: str, *, state: PagingState | dict[str, Any] | None = None
    ) -> str | None:
        """Async `find`."""
        return await self._arun(self._find(thread_id, ident, state))

    def _find(
        self, thread_id: str, ident: str, state: PagingState | dict[str, Any] | None
    ) -> Batches[str | None]:
        branch = state if isinstance(state, PagingState) or state is None else PagingState.from_value(state)
        walk = walk_root(
            ident,
            owned=None if branch is None else (lambda c: branch.owns("c", cluster_number(c))),
            roots=None if branch is None else branch.clusters,
        )
        parents_ns = thread_namespace(thread_id, "parents")
        try:
            node = next(walk)
            while True:
                (item,) = yield [GetOp(parents_ns, node)]
                node = walk.send(_parents(item))
        except StopIteration as stop:
            found = stop.value
        shortcut = found.path[:-1]  # path compression: point each visited node at the root
        existing = yield [GetOp(parents_ns, child) for child in shortcut]
        yield [
            self._put(thread_id, "parents", child, {"parents": [*_parents(item), found.root]})
            for child, item in zip(shortcut, existing, strict=True)
            if found.root not in _parents(item)
        ]
        root: str | None = found.root
        return root

    def members(self, thread_id: str, cluster_id: str, *, limit: int = 10_000) -> list[str]:
        """Page ids under a cluster node (expanding sub-clusters), oldest first, at most `limit`."""
        return self._run(self._members(thread_id, cluster_id, limit))

    async def amembers(self, thread_id: str, cluster_id: str, *, limit: int = 10_000) -> list[str]:
        """Async `members`."""
        return await self._arun(self._members(thread_id, cluster_id, limit))

    def _members(self, thread_id: str, cluster_id: str, limit: int) -> Batches[list[str]]:
        walk = walk_members(cluster_id, limit=limit)
        try:
            frontier = next(walk)
            while True:
                nodes = yield from self._get_clusters(thread_id, frontier)
                frontier = walk.send(nodes)
        except StopIteration as stop:
            return list(stop.value.pages)

    # -- writes -------------------------------------------------------------------------
    def put(self, thread_id: str, page: Page) -> None:
        """Write one page (operators and tests; steps write through `commit`)."""
        self._batch([self._put(thread_id, "pages", page.id, page.to_dict())])

    async def aput(self, thread_id: str, page: Page) -> None:
        """Async `put`."""
        await self._abatch([self._put(thread_id, "pages", page.id, page.to_dict())])

    def reserve(
        self, thread_id: str, kind: Literal["p", "c"], digests: Sequence[str], state: PagingState
    ) -> Reservation:
        """Allocate numbers for new records on `state`'s branch (see the module docstring): a list
        of numbers whose `held` holds the stored records at numbers already holding the same
        digest (the caller takes them as they are: a record is never rewritten).

        Hold the thread's lock from here to `commit` (the engine does). A number whose record or claim
        holds another digest is skipped; nothing is claimed here: `commit` claims the numbers with its
        records (`langmem_paging.storage.claims`), so a writer without that lock (another worker process)
        stepping another branch of the thread at the same moment never writes over this one."""
        return self._run(self._reserve(thread_id, kind, digests, state))

    async def areserve(
        self, thread_id: str, kind: Literal["p", "c"], digests: Sequence[str], state: PagingState
    ) -> Reservation:
        """Async `reserve`."""
        return await self._arun(self._reserve(thread_id, kind, digests, state))

    def _reserve(
        self, thread_id: str, kind: Literal["p", "c"], digests: Sequence[str], state: PagingState
    ) -> Batches[Reservation]:
        start = state.next[kind]
        records = thread_namespace(thread_id, "pages" if kind == "p" else "clusters")
        while True:
            items = yield [GetOp(thread_namespace(thread_id, "meta"), _NEXT_KEY)] + [
                GetOp(records, f"{kind}{start + i}") for i in range(len(digests))
            ]
            (claimed,) = yield Claimed(thread_id, kind, [start + i for i in range(len(digests))])
            high = items[0].value.get(kind, 1) if items[0] is not None else 1
            taken = [
                i
                for i, (item, digest) in enumerate(zip(items[1:], digests, strict=True))
                if (item is not None and item.value.get("digest") != digest)
                or claimed.get(start + i, digest) != digest
            ]
            if not taken:  # free, or holding these very records (a retry, or a branch that made them)
                numbers = state.allocate(kind, len(digests), floor=start)
                held = {n: item.value for n, item in zip(numbers, items[1:], strict=True) if item is not None}
                return Reservation(numbers, held)
            start = max(high, start + max(taken) + 1)

    def commit(
        self,
        thread_id: str,
        *,
        pages: Sequence[Page],
        nodes: Sequence[ClusterNode],
        state: PagingState,
        stats: Iterable[str] = (),
        sketch: TermSketch | None = None,
        passages: Passages | None = None,
    ) -> bool:
        """Write a step's new records, the parent pointers of its unions, mirrored access
        statistics, the high-water mark and the thread's keyword `sketch` with the new pages
        counted (the step read it before), in one batch, with the claims of the new records'
        numbers (one transaction where the store allows it) and `passages`, for an index that
        writes in that transaction (`indexes_with_records`). Idempotent. False, with nothing
        written, when another writer claimed one of the numbers since `reserve`: step again."""
        return self._run(self._commit(thread_id, pages, nodes, state, list(stats), sketch, passages))

    async def acommit(
        self,
        thread_id: str,
        *,
        pages: Sequence[Page],
        nodes: Sequence[ClusterNode],
        state: PagingState,
        stats: Iterable[str] = (),
        sketch: TermSketch | None = None,
        passages: Passages | None = None,
    ) -> bool:
        """Async `commit`."""
        return await self._arun(self._commit(thread_id, pages, nodes, state, list(stats), sketch, passages))

    def indexes_with_records(self, index: SearchIndex) -> bool:
        """Whether `index` writes a step's passages in the transaction of its records
        (`NumberClaims.joins`: an index on the store's own connection)."""
        return bool(self._claim(lambda claims: [claims.joins(index)])[0])

    def _commit(
        self,
        thread_id: str,
        pages: Sequence[Page],
        nodes: Sequence[ClusterNode],
        state: PagingState,
        stats: list[str],
        sketch: TermSketch | None = None,
        passages: Passages | None = None,
    ) -> Batches[bool]:
        if not (pages or nodes or stats):
            return True
        children = list(dict.fromkeys(c for node in nodes for c in node.children))
        records: list[tuple[Kind, Page | ClusterNode]] = [("pages", p) for p in pages]
        records += [("clusters", n) for n in nodes]
        reads = yield _commit_reads(thread_id, children, records)
        pointers, stored = reads[2 : 2 + len(children)], reads[2 + len(children) :]
        if _held_with_other_content(records, stored):
            # another writer holds one of these ids with other content: a record is never rewritten (only
            # `forget` changes one), so nothing is written and the step goes again past it, as for a claim
            return False
        parents = _joined({c: _parents(item) for c, item in zip(children, pointers, strict=True)}, nodes)
        ops = self._record_ops(thread_id, records, stored, parents, stats, state)
        ops += self._meta_ops(thread_id, reads[0], reads[1], state, sketch, formed=bool(pages))
        wanted = _numbers_wanted(pages, nodes)
        if not wanted and passages is None:
            yield ops
            return True
        # the lifecycle record as read above, read again in the write's transaction: a forget landing
        # between this read and the write refuses it, as one landing before this read does
        known = reads[1].value["generation"] if reads[1] is not None else None
        guard = Guard(thread_namespace(thread_id, "meta"), _LIFECYCLE_KEY, known)
        (written,) = yield ClaimedWrite(thread_id, wanted, ops, passages, guard)
        return bool(written)

    def _record_ops(
        self,
        thread_id: str,
        records: Sequence[tuple[Kind, Page | ClusterNode]],
        stored: Sequence[Item | None],
        parents: Mapping[str, list[str]],
        stats: Sequence[str],
        state: PagingState,
    ) -> list[Op]:
        """A commit's records not stored yet (the same digest stored already is this record: a retried
        step, a branch that made the same page; `reserve` handed its stored form to the step), the
        parent pointers of its unions and the mirrored access statistics."""
        ops: list[Op] = [
            self._put(thread_id, kind, record.id, record.to_dict())
            for (kind, record), item in zip(records, stored, strict=True)
            if item is None
        ]
        ops += [self._put(thread_id, "parents", c, {"parents": p}) for c, p in parents.items()]
        return ops + [
            self._put(thread_id, "stats", pid, dict(zip(("count", "last"), state.access(pid), strict=True)))
            for pid in stats
        ]

    def _meta_ops(
        self,
        thread_id: str,
        high_item: Item | None,
        lifecycle_item: Item | None,
        state: PagingState,
        sketch: TermSketch | None,
        *,
        formed: bool,
    ) -> list[Op]:
        """A commit's thread records: the high-water mark where it rose, the keyword sketch with the
        pages `formed` now counted, and the lifecycle record the thread's first pages start (a lifecycle that
        changed since the step read it refuses the commit: `LifecycleChanged`)."""
        high = high_item.value if high_item is not None else {"p": 1, "c": 1}
        new_high = {k: max(high.get(k, 1), state.next[k]) for k in ("p", "c")}
        ops: list[Op] = [self._put(thread_id, "meta", _NEXT_KEY, new_high)] if new_high != high else []
        if sketch is not None and formed:
            ops.append(self._put(thread_id, "meta", _SKETCH_KEY, sketch.to_record()))
        _check_lifecycle(lifecycle_item, state)
        if high_item is None and lifecycle_item is None and formed:  # the thread's first pages
            born = Lifecycle.new()
            ops.append(self._put(thread_id, "meta", _LIFECYCLE_KEY, born.to_record()))
            state.lifecycle = born.generation
        return ops

    # -- the page lifecycle: forgetting one message, deleting a thread -------------------
    def forget(
        self,
        thread_id: str,
        message_id: str,
        *,
        index: SearchIndex | None = None,
        graph: Any = None,
        config: dict[str, Any] | None = None,
        checkpointer: Any = None,
    ) -> list[str]:
        """Remove one message's text from everywhere the thread keeps it, for privacy (a card number
        typed by mistake). The lifecycle's one implementation (`PagingMiddleware.forget`, `PagingNode.forget`,
        the command line and the server call it); written once (`langmem_paging.storage.lifecycle`),
        idempotent, and converging after a crash at any point (a re-run derives what to correct
        from the records as they are):

        1. the store, in one batch: the message stays in its page as a tombstone (same id, type and
           tool-call ids; its text, tool arguments and metadata gone), so pages keep their shape and
           every other message still rebuilds exactly; the page's bookmark, keywords and terms and
           every cluster bookmark above it are re-derived from what remains (a neutral mark, ``[p3:]``,
           when nothing remains); the thread's keyword sketch loses the terms gone from every page;
           and the thread's lifecycle record gets a new generation listing the message (also when no
           page holds it: a message never paged, on a thread with no page yet too);
        2. the search index (`index`, and every default index this process made for the store): the
           pages' rows are replaced; an in-process index elsewhere sees the new generation before its
           next search and loads the thread again from the records;
        3. the state the next prompt is built from: the next step of every branch sees the new
           generation and corrects what its state shows from the records (bookmarks, cluster bookmarks,
           warm digests, an old checkpoint's sketch, recall results that carried the page, the message
           itself if it is still in the state, tombstoned in place; replace mode), no graph needed.
           With the compiled `graph` (and its `config`, default the thread's) or its `checkpointer`,
           the latest checkpoint is corrected now as well.

        Words another message quoted stay with that message (`langmem-paging where --text` names it).
        Recall results kept in older checkpoints (time travel) are the checkpointer's to delete.
        Returns the ids of the pages changed.

        Example:
            >>> from langgraph.store.memory import InMemoryStore
            >>> from langchain_core.messages import HumanMessage
            >>> pages = PageStore(InMemoryStore())
            >>> pages.put("t", Page(id="p1", messages=[HumanMessage("my card is 4111 1111", id="m1"),
            ...                                        HumanMessage("thanks", id="m2")], bookmark="[p1:card,4111]",
            ...                     keywords=["card", "4111"], token_count=9, boundary="fixed_2", created_turn=1))
            >>> pages.forget("t", "m1")
            ['p1']
            >>> page = pages.get("t", "p1")
            >>> [m.content for m in page.messages], page.bookmark
            (['[forgotten]', 'thanks'], '[p1:]')
        """
        from langmem_paging.storage.lifecycle_state import write_forgotten

        forgot = self._run(self._forget(thread_id, message_id))
        if forgot.pages:
            for each in self.search_indexes(index):
                each.update(thread_id, forgot.pages)
        write_forgotten(forgot, thread_id, graph=graph, config=config, checkpointer=checkpointer)
        return [p.id for p in forgot.pages]

    async def aforget(
        self,
        thread_id: str,
        message_id: str,
        *,
        index: SearchIndex | None = None,
        graph: Any = None,
        config: dict[str, Any] | None = None,
        checkpointer: Any = None,
    ) -> list[str]:
        """Async `forget`."""
        from langmem_paging.storage.lifecycle_state import awrite_forgotten

        forgot = await self._arun(self._forget(thread_id, message_id))
        if forgot.pages:
            for each in self.search_indexes(index):
                await each.aupdate(thread_id, forgot.pages)
        await awrite_forgotten(forgot, thread_id, graph=graph, config=config, checkpointer=checkpointer)
        return [p.id for p in forgot.pages]

    def search_indexes(self, index: SearchIndex | None = None) -> list[SearchIndex]:
        """The index given and every default index this process made for the store (the agent's
        unless it was given another; one per search embedder): a thread's rows leave all of them.
        An in-process index of another process is not reachable from here: it forgets the thread
        when that process restarts (documented in the README)."""
        known = store_indexes(self.store)
        return known if index is None or any(index is k for k in known) else [index, *known]

    def _forget(self, thread_id: str, message_id: str) -> Batches[Forgotten]:
        known = yield from self._get_lifecycle(thread_id)
        if known is None or message_id not in known.forgotten:
            # the intent first: a commit that has not written yet is refused from now on (its `Guard`), and
            # one that has is among the pages read next
            known = Lifecycle.new(known.forgotten if known is not None else {})
            known.forgotten[message_id] = []
            yield [self._put(thread_id, "meta", _LIFECYCLE_KEY, known.to_record())]
        pages: list[Page] = []
        for read in (yield from self._scan(thread_id, 500)):
            pages += yield from read
        # no page holds the message (it is still in the context, or the thread has no page yet): the
        # lifecycle record names it all the same, so the next step tombstones it in the state
        items = (yield from self._list_items(thread_id, "clusters")) if pages else []
        forgot = forget_in_records(pages, [ClusterNode.from_dict(it.value) for it in items], message_id)
        sketch = yield from self._get_sketch(thread_id)
        lifecycle = _next_lifecycle(known, message_id, forgot, {p.id: p for p in pages})
        forgot.earlier = [m for m in lifecycle.forgotten if m != message_id]
        forgot.generation = lifecycle.generation
        ops: list[Op] = [self._put(thread_id, "pages", page.id, page.to_dict()) for page in forgot.pages]
        ops += [self._put(thread_id, "clusters", node.id, node.to_dict()) for node in forgot.nodes]
        if sketch is not None:
            ops.append(
                self._put(thread_id, "meta", _SKETCH_KEY, forget_in_sketch(sketch, forgot.gone).to_record())
            )
        ops.append(self._put(thread_id, "meta", _LIFECYCLE_KEY, lifecycle.to_record()))
        # one batch: a page, the cluster bookmarks above it, the sketch and the generation that tells
        # every state and in-process index to follow never disagree
        yield ops
        return forgot

    def delete_thread(self, thread_id: str, *, index: SearchIndex | None = None) -> int:
        """Delete every record of a thread (pages, clusters, statistics, number claims) and its rows
        in the search index (`index`, and every default index this process made for the store; an
        in-process index of another process drops the thread at its next search: its lifecycle record
        is gone); returns how many store records.
        Idempotent. A new conversation under the same thread id starts empty and is searchable."""
        for each in self.search_indexes(index):  # first: a record's delete then finds no passage to follow
            each.drop(thread_id)
        deleted = self._run(self._delete_thread(thread_id))
        self._claim(lambda claims: _dropped(claims, thread_id))
        return deleted

    async def adelete_thread(self, thread_id: str, *, index: SearchIndex | None = None) -> int:
        """Async `delete_thread`."""
        for each in self.search_indexes(index):
            await each.adrop(thread_id)
        deleted = await self._arun(self._delete_thread(thread_id))
        try:
            await claims_for(self.store).adrop(thread_id)
        except Exception as error:  # noqa: BLE001 - the claims live in the store's database
            raise self._failed(error) from error
        return deleted

    def _delete_thread(self, thread_id: str) -> Batches[int]:
        ops: list[Op] = []
        for kind in KINDS:
            items = yield from self._list_items(thread_id, kind)
            ops += [self._put(thread_id, kind, item.key, None) for item in items]
        for i in range(0, len(ops), 500):
            yield ops[i : i + 500]
        return len(ops)


def _check_lifecycle(item: Item | None, state: PagingState) -> None:
    """Refuse a commit whose step started before a forget landed (see `LifecycleChanged`)."""
    if item is None:
        return
    current = Lifecycle.from_record(item.value)
    if current.forgotten and current.generation != state.lifecycle:
        raise LifecycleChanged(
            f"a message of this thread was forgotten while the step ran (lifecycle {state.lifecycle} -> "
            f"{current.generation}); its records were not written"
        )


def _next_lifecycle(
    known: Lifecycle, message_id: str, forgot: Forgotten, before: dict[str, Page]
) -> Lifecycle:
    """The lifecycle record a forget writes: a new generation, unless an earlier run already
    scrubbed these very pages (a re-run changes nothing, so it writes the same record)."""
    holders = [page.id for page in forgot.pages]
    unchanged = not forgot.nodes and all(p.to_dict() == before[p.id].to_dict() for p in forgot.pages)
    if known.forgotten.get(message_id) == holders and unchanged:
        return known
    lifecycle = Lifecycle.new(known.forgotten)
    lifecycle.forgotten[message_id] = holders
    return lifecycle


def _dropped(claims: Any, thread_id: str) -> list[bool]:
    claims.drop(thread_id)
    return []


def _page(item: Item | None, stats: Item | None = None) -> Page | None:
    if item is None:
        return None
    page = Page.from_dict(item.value)
    if stats is not None:
        page.access_count = stats.value.get("count", 0)
        page.last_access = stats.value.get("last", page.created_turn)
    return page


def _parents(item: Item | None) -> list[str]:
    return list(item.value.get("parents", [])) if item is not None else []


def _commit_reads(
    thread_id: str, children: Sequence[str], records: Sequence[tuple[Kind, Page | ClusterNode]]
) -> list[GetOp]:
    """What a commit reads first: the high-water mark, the lifecycle record, the parent pointers of the
    unions' children, and each record's id (held already?)."""
    meta = thread_namespace(thread_id, "meta")
    return (
        [GetOp(meta, _NEXT_KEY), GetOp(meta, _LIFECYCLE_KEY)]
        + [GetOp(thread_namespace(thread_id, "parents"), c) for c in children]
        + [GetOp(thread_namespace(thread_id, kind), record.id) for kind, record in records]
    )


def _numbers_wanted(pages: Sequence[Page], nodes: Sequence[ClusterNode]) -> list[tuple[str, int, str]]:
    """The numbers a commit claims, with the digest of the record each is for."""
    wanted = [("p", page_number(p.id), p.digest) for p in pages if p.digest]
    return wanted + [("c", cluster_number(n.id), n.digest) for n in nodes if n.digest]


def _held_with_other_content(
    records: Sequence[tuple[Kind, Page | ClusterNode]], stored: Sequence[Item | None]
) -> bool:
    """Whether a record's id is stored already with another digest (another writer's content)."""
    return any(
        item is not None and item.value.get("digest") != record.digest
        for (_, record), item in zip(records, stored, strict=True)
    )


def _joined(parents: dict[str, list[str]], nodes: Sequence[ClusterNode]) -> dict[str, list[str]]:
    """Parent pointers with the new unions added (each once)."""
    for node in nodes:
        for child in node.children:
            if node.id not in parents[child]:
                parents[child].append(node.id)
    return parents


def _chunks(high: int, chunk: int) -> Iterator[list[str]]:
    for start in range(1, high, chunk):
        yield [f"p{n}" for n in range(start, min(high, start + chunk))]
