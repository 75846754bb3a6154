"""Stores and pagers as the benchmark opens them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from langgraph.store.sqlite import SqliteStore

from evals.policy_spec import paging_options
from langmem_paging import InMemoryBM25Index, PagingConfig
from langmem_paging.runtime.pager import Pager
from langmem_paging.storage.page_store import PageStore

from .settings import BOUNDARY, MAX_TOKENS


def sqlite_store(path: Path) -> SqliteStore:
    """A `SqliteStore` on a file, as a server would open it."""
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    store = SqliteStore(conn)
    store.setup()
    return store


def make_pager(store, *, policy: str, mode: str = "replace", index: InMemoryBM25Index | None = None) -> Pager:
    """`policy`: a policy spec as the evals take it (``lfu``, ``stae:grouping=kmeans``,
    ``tiers:utility``)."""
    config = PagingConfig(max_tokens=MAX_TOKENS, boundary=BOUNDARY, mode=mode, **paging_options(policy))
    return Pager(config, PageStore(store), index=index or InMemoryBM25Index())
