"""A thread's store records as they are: listing, counting, exporting and importing them exactly,
and a view of a store whose reads leave TTLs alone."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, Result, SearchOp

from langmem_paging.core.records import cluster_number, page_number
from langmem_paging.index.base import SearchIndex
from langmem_paging.storage.page_store import KINDS, Kind, PageStore, thread_namespace

__all__ = ["export_records", "import_records", "list_items", "record_counts", "without_ttl_refresh"]

_WRITE_BATCH = 500


class _WithoutTTLRefresh(BaseStore):
    """A store whose reads never refresh TTLs (writes pass through unchanged)."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store
        self.__wrapped__ = store  # the store it views: its search index is this one's (`default_index`)
        self.supports_ttl = getattr(store, "supports_ttl", False)

    @staticmethod
    def _ops(ops: Iterable[Any]) -> list[Any]:
        return [op._replace(refresh_ttl=False) if isinstance(op, (GetOp, SearchOp)) else op for op in ops]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self.store.batch(self._ops(ops))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self.store.abatch(self._ops(ops))


def without_ttl_refresh(store: BaseStore) -> BaseStore:
    """`store`, except that reads do not refresh TTLs.

    On a store configured with ``refresh_on_read``, `PageStore` reads (like any `GetOp`/`SearchOp`,
    whose ``refresh_ttl`` defaults to True) push back the expiry of the records they read; looking
    at a thread with the operator tools must not keep it alive.
    """
    return store if isinstance(store, _WithoutTTLRefresh) else _WithoutTTLRefresh(store)


def list_items(store: BaseStore, thread_id: str, kind: Kind) -> list[Item]:
    """Every record of one kind of a thread (paged through the store, as `PageStore` lists)."""
    return PageStore(store, retries=0).list_items(thread_id, kind)


def record_counts(store: BaseStore, thread_id: str) -> dict[str, int]:
    """How many store records the thread has, by kind."""
    return {kind: len(list_items(store, thread_id, kind)) for kind in KINDS}


def _key_order(key: str) -> tuple[Any, ...]:
    for parse in (page_number, cluster_number):
        try:
            return (0, parse(key), key)
        except ValueError:
            pass
    return (1, 0, key)


def export_records(store: BaseStore, thread_id: str) -> list[dict[str, Any]]:
    """Every store record of a thread, as ``{"thread", "kind", "key", "value"}`` dicts (JSON-safe),
    kinds in `KINDS` order and keys in id order."""
    records = []
    for kind in KINDS:
        items = sorted(list_items(store, thread_id, kind), key=lambda it: _key_order(it.key))
        records += [{"thread": thread_id, "kind": kind, "key": it.key, "value": it.value} for it in items]
    return records


def _by_target_thread(
    records: Iterable[Mapping[str, Any]], thread_id: str | None
) -> dict[str, list[Mapping[str, Any]]]:
    """Validated records grouped by the thread they go into."""
    by_thread: dict[str, list[Mapping[str, Any]]] = {}
    sources: set[str] = set()
    for n, record in enumerate(records, 1):
        if not isinstance(record, Mapping) or not {"kind", "key", "value"} <= record.keys():
            raise ValueError(
                f"record {n} is not an exported record (needs kind, key and value): {record!r:.80}"
            )
        if record["kind"] not in KINDS:
            raise ValueError(
                f"record {n} has unknown kind {record['kind']!r}. Available: "
                f"{', '.join(repr(k) for k in KINDS)}."
            )
        source = record.get("thread")
        if thread_id is None and not source:
            raise ValueError(f"record {n} names no thread: pass a target thread id.")
        sources.add(str(source))
        by_thread.setdefault(thread_id or str(source), []).append(record)
    if thread_id is not None and len(sources) > 1:
        raise ValueError(
            f"the records come from {len(sources)} threads ({', '.join(sorted(sources))}); "
            "import them without a target thread id, or one thread at a time."
        )
    return by_thread


def import_records(
    store: BaseStore,
    records: Iterable[Mapping[str, Any]],
    *,
    thread_id: str | None = None,
    ttl: float | None = None,
    index: SearchIndex | None = None,
) -> dict[str, int]:
    """Write exported records back, into their own thread or into `thread_id`.

    Args:
        store: The target store.
        records: `export_records` output (or its JSON lines, parsed).
        thread_id: Put every record into this thread instead of the one it came from.
        ttl: Minutes until the store may expire them (stores with TTL support), as `PageStore(ttl=)`.
        index: A search index the agents use besides the store's default one. Both forget the
            target thread, so their first search loads it from the imported records (an index that
            still held rows of an earlier thread under that id never serves them).

    Returns:
        Records written, by target thread.

    Raises:
        ValueError: A record without ``kind``/``key``/``value`` or of an unknown kind, records of
            several threads with `thread_id`, or a target thread that already has records
            (delete it first: importing never mixes two threads' records).
    """
    if ttl is not None and not getattr(store, "supports_ttl", False):
        raise ValueError(f"`ttl` needs a store with TTL support ({type(store).__name__} has none).")
    by_thread = _by_target_thread(records, thread_id)
    for target in by_thread:
        existing = {k: n for k, n in record_counts(store, target).items() if n}
        if existing:
            raise ValueError(
                f"thread {target!r} already has records ({existing}); delete them first "
                "or import into another thread id."
            )
    written = {}
    for target, items in by_thread.items():
        ops = [
            PutOp(thread_namespace(target, r["kind"]), r["key"], dict(r["value"]), index=False, ttl=ttl)
            for r in items
        ]
        for i in range(0, len(ops), _WRITE_BATCH):
            store.batch(ops[i : i + _WRITE_BATCH])
        written[target] = len(ops)
        for each in PageStore(store).search_indexes(index):
            each.drop(target)
    return written
