"""The process's default search index for each store: FTS5 in a file-backed SQLite store's own file,
PostgreSQL full-text search in a Postgres store's own database (on its connection), an in-process
BM25 index otherwise (hybrid when an embedder is configured). One per store and
embedder, so pagers over different stores never share one."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from langgraph.store.base import BaseStore

from langmem_paging.index.base import InMemoryBM25Index, SearchIndex
from langmem_paging.index.postgres import PostgresSearchIndex
from langmem_paging.index.sqlite import SqliteSearchIndex

__all__ = ["default_index", "store_indexes"]


_DEFAULT_INDEXES: weakref.WeakKeyDictionary[BaseStore, dict[Any, SearchIndex]] = weakref.WeakKeyDictionary()
_DEFAULT_INDEXES_LOCK = threading.Lock()


def default_index(store: BaseStore, embedder: Any = None) -> SearchIndex:
    """The process's search index for a store (one per store and embedder): for a file-backed
    SQLite store, an FTS5 index in the store's own file (`SqliteSearchIndex`: nothing to rebuild
    after a restart); for a `PostgresStore` or `AsyncPostgresStore`, a `PostgresSearchIndex` on the
    store's own connection (one index for every worker); else an in-process BM25 index, rebuilt from the store on a process's first
    search of a thread; hybrid (in-process) when an embedder is configured. Keyed by the store, so
    pagers over different stores never share one (the same thread id in two stores is two threads).
    A store that wraps another (``__wrapped__``, as the command line's TTL-preserving view does) gets
    the index of the store it wraps: the same rows the agent writes."""
    while isinstance(getattr(store, "__wrapped__", None), BaseStore):
        store = store.__wrapped__  # type: ignore[attr-defined]
    key = embedder if isinstance(embedder, str) or embedder is None else id(embedder)
    with _DEFAULT_INDEXES_LOCK:
        per_store = _DEFAULT_INDEXES.setdefault(store, {})
        index = per_store.get(key)
        if index is None:
            index = per_store[key] = _new_index(store, embedder)
    return index


def store_indexes(store: BaseStore) -> list[SearchIndex]:
    """Every index this process made for `store` (one per embedder; at least the default one): where
    a forgotten or deleted thread's rows must leave."""
    default = default_index(store)
    while isinstance(getattr(store, "__wrapped__", None), BaseStore):
        store = store.__wrapped__  # type: ignore[attr-defined]
    with _DEFAULT_INDEXES_LOCK:
        others = [i for i in _DEFAULT_INDEXES.get(store, {}).values() if i is not default]
    return [default, *others]


def _new_index(store: BaseStore, embedder: Any) -> SearchIndex:
    if embedder is None:
        return (
            SqliteSearchIndex.for_store(store) or PostgresSearchIndex.for_store(store) or InMemoryBM25Index()
        )
    from langmem_paging.strategies.embeddings import get_embedder

    return InMemoryBM25Index(embedder=get_embedder(embedder))
