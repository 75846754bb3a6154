"""PageStore: pages and the cluster forest of every thread, over any LangGraph `BaseStore`.

Keys are namespaced per thread, built in one place (`thread_namespace`), so a thread
can only ever read its own pages. Records are written once and never rewritten by
another branch: a page or cluster number is handed out only if no record with
different content holds it (`reserve`), and a per-thread high-water mark makes forks
and time travel skip numbers other branches took. Sync and async differ only at the
store call (`batch` vs `abatch`); failed calls are retried, and every write is
idempotent, so a retried or repeated step writes the same records again.

Namespaces under ``("langmem_paging", <thread>)``:

- ``pages``: `Page` records by page id (``p3``), written when the page forms;
- ``clusters``: `ClusterNode` records by cluster id (``c2``), written when made;
- ``parents``: for a page or cluster id, the clusters that joined it (union-find pointers);
- ``stats``: access counts mirrored from the checkpoint for operators;
- ``meta``: the high-water mark of page and cluster numbers.
"""

from __future__ import annotations

import asyncio
import logging
import time
import warnings
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from typing import Any, Literal

from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, SearchOp

from langmem_paging.records import ClusterNode, Page, cluster_number, page_number
from langmem_paging.state import PagingState

__all__ = ["NAMESPACE_ROOT", "PageStore", "abatch_any", "thread_namespace"]

logger = logging.getLogger("langmem_paging")

NAMESPACE_ROOT = "langmem_paging"
Kind = Literal["pages", "clusters", "parents", "stats", "meta"]
KINDS: tuple[Kind, ...] = ("pages", "clusters", "parents", "stats", "meta")
_LIST_BATCH = 200
_NEXT_KEY = "next"


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


def _valid_page_id(page_id: Any) -> bool:
    try:
        page_number(page_id)
    except ValueError:
        return False
    return True


def _valid_cluster_id(cluster_id: Any) -> bool:
    try:
        cluster_number(cluster_id)
    except ValueError:
        return False
    return True


class PageStore:
    """Pages of every thread, over a LangGraph store.

    Args:
        store: Any `BaseStore` (InMemoryStore, SqliteStore, PostgresStore, ...). When None,
            the middleware binds the graph's store at first use, or an in-memory store with
            a warning.
        ttl: Minutes after which the store may expire a thread's records (stores that
            support TTL, e.g. `SqliteStore`/`PostgresStore` with a TTL sweeper); None keeps
            them until `delete_thread`.
        retries: How many times a failed store call is retried (with a short backoff)
            before the error reaches the caller.

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

    def __init__(self, store: BaseStore | None = None, *, ttl: float | None = None, retries: int = 2) -> None:
        if store is not None and not isinstance(store, BaseStore):
            raise TypeError(
                f"`store` must be a LangGraph BaseStore (InMemoryStore, SqliteStore, PostgresStore, ...); "
                f"got {type(store).__name__}."
            )
        if ttl is not None and ttl <= 0:
            raise ValueError("`ttl` must be a positive number of minutes, or None.")
        self.store = None
        self.ttl = ttl
        self.retries = retries
        if store is not None:
            self._set(store)

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
        self._set(store)

    def _set(self, store: BaseStore) -> None:
        if self.ttl is not None and not getattr(store, "supports_ttl", False):
            raise ValueError(
                f"`ttl` needs a store with TTL support ({type(store).__name__} has none): use SqliteStore, "
                "PostgresStore (with a TTL sweeper), or drop `ttl` and call `delete_thread` instead."
            )
        self.store = store

    def _backend(self) -> BaseStore:
        if self.store is None:
            raise ValueError("PageStore has no store: pass `store=` or run inside a graph with a store.")
        return self.store

    # -- the only I/O: batch / abatch, retried ----------------------------------------
    def _batch(self, ops: Sequence[Op]) -> list[Any]:
        if not ops:
            return []
        for attempt in range(self.retries + 1):
            try:
                return self._backend().batch(ops)
            except Exception as error:  # noqa: BLE001 - any backend error is retried, then raised
                if attempt == self.retries:
                    raise
                logger.warning("page store call failed (%s: %s); retrying", type(error).__name__, error)
                time.sleep(0.01 * 2**attempt)
        raise AssertionError("unreachable")

    async def _abatch(self, ops: Sequence[Op]) -> list[Any]:
        if not ops:
            return []
        store = self._backend()
        for attempt in range(self.retries + 1):
            try:
                return await abatch_any(store, ops)
            except Exception as error:  # noqa: BLE001
                if attempt == self.retries:
                    raise
                logger.warning("page store call failed (%s: %s); retrying", type(error).__name__, error)
                await asyncio.sleep(0.01 * 2**attempt)
        raise AssertionError("unreachable")

    def _put(self, thread_id: str, kind: Kind, key: str, value: dict[str, Any] | None) -> PutOp:
        return PutOp(thread_namespace(thread_id, kind), key, value, index=False,
                     ttl=self._ttl() if value is not None else None)

    def _ttl(self) -> float | None:
        """`ttl`, else the store's own default (``ttl={"default_ttl": ...}``), else None: never expire."""
        if self.ttl is not None:
            return self.ttl
        config = getattr(self.store, "ttl_config", None) or {}
        return config.get("default_ttl")

    # -- decoding ------------------------------------------------------------------------
    @staticmethod
    def _page(item: Item | None, stats: Item | None = None) -> Page | None:
        if item is None:
            return None
        page = Page.from_dict(item.value)
        if stats is not None:
            page.access_count = stats.value.get("count", 0)
            page.last_access = stats.value.get("last", page.created_turn)
        return page

    def _get_ops(self, thread_id: str, page_ids: Sequence[str]) -> list[Op]:
        ops: list[Op] = []
        for page_id in page_ids:
            ops.append(GetOp(thread_namespace(thread_id, "pages"), page_id))
            ops.append(GetOp(thread_namespace(thread_id, "stats"), page_id))
        return ops

    def _pages_from(self, page_ids: Sequence[str], items: list) -> dict[str, Page]:
        out = {}
        for k, page_id in enumerate(page_ids):
            page = self._page(items[2 * k], items[2 * k + 1])
            if page is not None:
                out[page_id] = page
        return out

    # -- reads ---------------------------------------------------------------------------
    def get(self, thread_id: str, page_id: str) -> Page | None:
        """The page, or None if this thread has no such page (or the id is malformed)."""
        return self.get_many(thread_id, [page_id]).get(page_id)

    async def aget(self, thread_id: str, page_id: str) -> Page | None:
        """Async `get`."""
        return (await self.aget_many(thread_id, [page_id])).get(page_id)

    def get_many(self, thread_id: str, page_ids: Iterable[str]) -> dict[str, Page]:
        """The pages that exist among `page_ids`, by id, in one store call."""
        ids = [p for p in dict.fromkeys(page_ids) if _valid_page_id(p)]
        return self._pages_from(ids, self._batch(self._get_ops(thread_id, ids)))

    async def aget_many(self, thread_id: str, page_ids: Iterable[str]) -> dict[str, Page]:
        """Async `get_many`."""
        ids = [p for p in dict.fromkeys(page_ids) if _valid_page_id(p)]
        return self._pages_from(ids, await self._abatch(self._get_ops(thread_id, ids)))

    def get_cluster(self, thread_id: str, cluster_id: str) -> ClusterNode | None:
        """A cluster node, or None."""
        return self.get_clusters(thread_id, [cluster_id]).get(cluster_id)

    def get_clusters(self, thread_id: str, cluster_ids: Iterable[str]) -> dict[str, ClusterNode]:
        """The cluster nodes that exist among `cluster_ids`, in one store call."""
        ids = [c for c in dict.fromkeys(cluster_ids) if _valid_cluster_id(c)]
        items = self._batch([GetOp(thread_namespace(thread_id, "clusters"), c) for c in ids])
        return {c: ClusterNode.from_dict(it.value) for c, it in zip(ids, items) if it is not None}

    async def aget_clusters(self, thread_id: str, cluster_ids: Iterable[str]) -> dict[str, ClusterNode]:
        """Async `get_clusters`."""
        ids = [c for c in dict.fromkeys(cluster_ids) if _valid_cluster_id(c)]
        items = await self._abatch([GetOp(thread_namespace(thread_id, "clusters"), c) for c in ids])
        return {c: ClusterNode.from_dict(it.value) for c, it in zip(ids, items) if it is not None}

    def _list_op(self, thread_id: str, kind: Kind, offset: int) -> SearchOp:
        return SearchOp(thread_namespace(thread_id, kind), limit=_LIST_BATCH, offset=offset)

    def _list_items(self, thread_id: str, kind: Kind) -> list[Item]:
        items: list[Item] = []
        while True:
            batch = self._batch([self._list_op(thread_id, kind, len(items))])[0]
            items.extend(batch)
            if len(batch) < _LIST_BATCH:
                return items

    async def _alist_items(self, thread_id: str, kind: Kind) -> list[Item]:
        items: list[Item] = []
        while True:
            batch = (await self._abatch([self._list_op(thread_id, kind, len(items))]))[0]
            items.extend(batch)
            if len(batch) < _LIST_BATCH:
                return items

    def _high_water(self, thread_id: str) -> int | None:
        (item,) = self._batch([GetOp(thread_namespace(thread_id, "meta"), _NEXT_KEY)])
        return item.value.get("p", 1) if item is not None else None

    async def _ahigh_water(self, thread_id: str) -> int | None:
        (item,) = await self._abatch([GetOp(thread_namespace(thread_id, "meta"), _NEXT_KEY)])
        return item.value.get("p", 1) if item is not None else None

    def scan(self, thread_id: str, *, chunk: int = 500) -> Iterator[Page]:
        """Every page of a thread (every branch), in page order, read by key in chunks up to the
        high-water mark: linear in the pages, for operators and index rebuilds, never on a turn's
        path. (Pages written with `put` alone, with no mark, are listed instead.)"""
        high = self._high_water(thread_id)
        if high is None:
            yield from self._listed(self._list_items(thread_id, "pages"), self._list_items(thread_id, "stats"))
            return
        for start in range(1, high, chunk):
            found = self.get_many(thread_id, [f"p{n}" for n in range(start, min(high, start + chunk))])
            yield from (found[k] for k in sorted(found, key=page_number))

    async def ascan(self, thread_id: str, *, chunk: int = 500) -> AsyncIterator[Page]:
        """Async `scan`."""
        high = await self._ahigh_water(thread_id)
        if high is None:
            for page in self._listed(await self._alist_items(thread_id, "pages"),
                                     await self._alist_items(thread_id, "stats")):
                yield page
            return
        for start in range(1, high, chunk):
            found = await self.aget_many(thread_id, [f"p{n}" for n in range(start, min(high, start + chunk))])
            for key in sorted(found, key=page_number):
                yield found[key]

    def _listed(self, items: list[Item], stats: list[Item]) -> list[Page]:
        by_key = {it.key: it for it in stats}
        return sorted((self._page(it, by_key.get(it.key)) for it in items), key=lambda p: page_number(p.id))

    def list(self, thread_id: str) -> list[Page]:
        """All pages of a thread (every branch), in page order (see `scan`)."""
        return list(self.scan(thread_id))

    async def alist(self, thread_id: str) -> list[Page]:
        """Async `list`."""
        return [page async for page in self.ascan(thread_id)]

    def list_clusters(self, thread_id: str) -> list[ClusterNode]:
        """All cluster nodes of a thread (every branch), in id order."""
        nodes = [ClusterNode.from_dict(it.value) for it in self._list_items(thread_id, "clusters")]
        return sorted(nodes, key=lambda n: cluster_number(n.id))

    # -- the union-find forest -----------------------------------------------------------
    def _parents(self, thread_id: str, ident: str) -> list[str]:
        (item,) = self._batch([GetOp(thread_namespace(thread_id, "parents"), ident)])
        return list(item.value.get("parents", [])) if item is not None else []

    def find(self, thread_id: str, ident: str, *, state: PagingState | dict | None = None) -> str | None:
        """The cluster root holding a page (or cluster), or None if it is in no cluster.

        With `state` (a branch's paging state) the answer is exact for that branch: only
        clusters the branch made count, and its current roots end the walk. Without it, the
        newest cluster at each level is followed (the most recent branch). Shortcuts found
        on the way are stored (path compression), so later finds take one step.
        """
        branch = state if isinstance(state, PagingState) or state is None else PagingState.from_value(state)
        node, path = ident, []
        for _ in range(10_000):
            parents = [p for p in self._parents(thread_id, node) if _valid_cluster_id(p)]
            if branch is not None:
                parents = [p for p in parents if branch.owns("c", cluster_number(p))]
            if not parents or (branch is not None and node in branch.clusters):
                break
            path.append(node)
            node = max(parents, key=cluster_number)
        if node == ident:
            return None
        for child in path[:-1]:  # path compression: point each visited node at the root
            existing = self._parents(thread_id, child)
            if node not in existing:
                self._batch([self._put(thread_id, "parents", child, {"parents": [*existing, node]})])
        return node

    def members(self, thread_id: str, cluster_id: str, *, limit: int = 10_000) -> list[str]:
        """Page ids under a cluster node (expanding sub-clusters), oldest first, at most `limit`."""
        out: list[str] = []
        frontier = [cluster_id]
        while frontier and len(out) < limit:
            nodes = self.get_clusters(thread_id, frontier)
            frontier = []
            for cid in sorted(nodes, key=cluster_number):
                for child in nodes[cid].children:
                    (out if child.startswith("p") else frontier).append(child)
        return sorted(set(out), key=page_number)[:limit]

    # -- writes -------------------------------------------------------------------------
    def put(self, thread_id: str, page: Page) -> None:
        """Write one page (operators and tests; steps write through `commit`)."""
        self._batch([self._put(thread_id, "pages", page.id, page.to_dict())])

    async def aput(self, thread_id: str, page: Page) -> None:
        """Async `put`."""
        await self._abatch([self._put(thread_id, "pages", page.id, page.to_dict())])

    def _reserve_ops(self, thread_id: str, kind: Literal["p", "c"], start: int, n: int) -> list[Op]:
        ns = thread_namespace(thread_id, "pages" if kind == "p" else "clusters")
        return [GetOp(thread_namespace(thread_id, "meta"), _NEXT_KEY)] + [
            GetOp(ns, f"{kind}{start + i}") for i in range(n)
        ]

    @staticmethod
    def _free_from(items: list, digests: Sequence[str], kind: str, start: int) -> int | None:
        """None if the numbers from `start` are free (or hold these very records), else where to
        look next."""
        high = (items[0].value.get(kind, 1) if items[0] is not None else 1)
        taken = [i for i, (item, digest) in enumerate(zip(items[1:], digests)) if
                 item is not None and item.value.get("digest") != digest]
        if not taken:
            return None
        return max(high, start + max(taken) + 1)

    def reserve(self, thread_id: str, kind: Literal["p", "c"], digests: Sequence[str], state: PagingState) -> list[int]:
        """Allocate numbers for new records on `state`'s branch (see the module docstring).

        Hold the thread's lock from here to `commit` (the `Pager` does)."""
        start = state.next[kind]
        while True:
            items = self._batch(self._reserve_ops(thread_id, kind, start, len(digests)))
            moved = self._free_from(items, digests, kind, start)
            if moved is None:
                return state.allocate(kind, len(digests), floor=start)
            start = moved

    async def areserve(self, thread_id: str, kind: Literal["p", "c"], digests: Sequence[str],
                       state: PagingState) -> list[int]:
        """Async `reserve`."""
        start = state.next[kind]
        while True:
            items = await self._abatch(self._reserve_ops(thread_id, kind, start, len(digests)))
            moved = self._free_from(items, digests, kind, start)
            if moved is None:
                return state.allocate(kind, len(digests), floor=start)
            start = moved

    def _commit_reads(self, thread_id: str, nodes: Sequence[ClusterNode]) -> list[Op]:
        children = [c for node in nodes for c in node.children]
        return [GetOp(thread_namespace(thread_id, "meta"), _NEXT_KEY)] + [
            GetOp(thread_namespace(thread_id, "parents"), c) for c in dict.fromkeys(children)
        ]

    def _commit_writes(self, thread_id: str, pages, nodes, state: PagingState, stats: Iterable[str],
                       reads: list) -> list[Op]:
        ops: list[Op] = [self._put(thread_id, "pages", p.id, p.to_dict()) for p in pages]
        ops += [self._put(thread_id, "clusters", n.id, n.to_dict()) for n in nodes]
        children = list(dict.fromkeys(c for node in nodes for c in node.children))
        parents = {c: list(item.value.get("parents", [])) if item is not None else []
                   for c, item in zip(children, reads[1:])}
        for node in nodes:
            for child in node.children:
                if node.id not in parents[child]:
                    parents[child].append(node.id)
        ops += [self._put(thread_id, "parents", c, {"parents": p}) for c, p in parents.items()]
        for page_id in stats:
            count, last = state.access(page_id)
            ops.append(self._put(thread_id, "stats", page_id, {"count": count, "last": last}))
        high = reads[0].value if reads[0] is not None else {"p": 1, "c": 1}
        new_high = {k: max(high.get(k, 1), state.next[k]) for k in ("p", "c")}
        if new_high != high:
            ops.append(self._put(thread_id, "meta", _NEXT_KEY, new_high))
        return ops

    def commit(self, thread_id: str, *, pages: Sequence[Page], nodes: Sequence[ClusterNode],
               state: PagingState, stats: Iterable[str] = ()) -> None:
        """Write a step's new records, the parent pointers of its unions, mirrored access
        statistics and the high-water mark. Idempotent."""
        stats = list(stats)
        if not (pages or nodes or stats):
            return
        reads = self._batch(self._commit_reads(thread_id, nodes))
        self._batch(self._commit_writes(thread_id, pages, nodes, state, stats, reads))

    async def acommit(self, thread_id: str, *, pages: Sequence[Page], nodes: Sequence[ClusterNode],
                      state: PagingState, stats: Iterable[str] = ()) -> None:
        """Async `commit`."""
        stats = list(stats)
        if not (pages or nodes or stats):
            return
        reads = await self._abatch(self._commit_reads(thread_id, nodes))
        await self._abatch(self._commit_writes(thread_id, pages, nodes, state, stats, reads))

    # -- lifecycle ----------------------------------------------------------------------
    def _delete_ops(self, thread_id: str, listed: dict[Kind, list[Item]]) -> list[Op]:
        return [self._put(thread_id, kind, item.key, None) for kind, items in listed.items() for item in items]

    def delete_thread(self, thread_id: str) -> int:
        """Delete every record of a thread (pages, clusters, statistics); returns how many."""
        listed = {kind: self._list_items(thread_id, kind) for kind in KINDS}
        ops = self._delete_ops(thread_id, listed)
        for i in range(0, len(ops), 500):
            self._batch(ops[i : i + 500])
        return len(ops)

    async def adelete_thread(self, thread_id: str) -> int:
        """Async `delete_thread`."""
        listed = {kind: await self._alist_items(thread_id, kind) for kind in KINDS}
        ops = self._delete_ops(thread_id, listed)
        for i in range(0, len(ops), 500):
            await self._abatch(ops[i : i + 500])
        return len(ops)

