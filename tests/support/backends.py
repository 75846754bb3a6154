"""The LangGraph store backends the conformance suites run against, and the plumbing each needs.

``memory`` and ``sqlite`` are made per test. ``postgres`` (`PostgresStore`) and ``apostgres``
(`AsyncPostgresStore`) share one database on the session's throwaway server (`postgres_server`),
emptied before each test (a truncate takes milliseconds; a fresh database, ~0.3 s).

An `AsyncPostgresStore` belongs to the event loop it was made in: its async calls must run on that
loop, and its sync calls (`batch`) are forwarded to that loop from other threads and refused on the
loop itself. So an async test gets one made in the test's own loop, and a sync test gets one made on a
background loop (`StoreLoop`), which is what a sync caller in a worker thread of an async server sees;
`run_coroutine` runs a sync test's coroutines (``graph.ainvoke``) on that loop.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import weakref
from collections.abc import Coroutine
from typing import Any

from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

POSTGRES_BACKENDS = ("apostgres", "postgres")
BACKENDS = ("apostgres", "memory", "postgres", "sqlite")

DATABASE_OF: weakref.WeakKeyDictionary[BaseStore, str] = weakref.WeakKeyDictionary()
"""URI of the database behind each Postgres store handed to a test (for raw SQL checks)."""


def sqlite_store(path: str = ":memory:") -> SqliteStore:
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    return store


LOCAL_FACTORIES = {"memory": InMemoryStore, "sqlite": sqlite_store}


class StoreLoop:
    """An event loop running in a daemon thread, for loop-bound stores used by sync tests."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="store-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 120) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        async def cancel_the_rest() -> None:  # e.g. AsyncBatchedBaseStore's background queue task
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        self.run(cancel_the_rest())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


def store_loop_of(store: Any) -> asyncio.AbstractEventLoop | None:
    """The loop an async store is bound to (AsyncPostgresStore, any AsyncBatchedBaseStore), or None."""
    return getattr(store, "loop", None) or getattr(store, "_loop", None)


def run_coroutine(coro: Coroutine[Any, Any, Any], store: Any = None) -> Any:
    """Run `coro` from sync code: on `store`'s own loop if it has a running one elsewhere, else in a
    fresh loop (``asyncio.run``)."""
    loop = store_loop_of(store)
    if loop is not None and loop.is_running():
        return asyncio.run_coroutine_threadsafe(coro, loop).result(300)
    return asyncio.run(coro)


def truncate_store_tables(uri: str) -> None:
    import psycopg

    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("TRUNCATE store CASCADE")  # the store's search index references its records
        # the page-number claims and the search index live beside the store (langmem_paging.storage.claims,
        # PostgresSearchIndex.for_store): a wiped store starts with none, as delete_thread leaves a thread
        for table in (
            "langmem_paging_claims",
            "langmem_paging_passages_terms",
            "langmem_paging_passages_threads",
        ):
            if conn.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()[0]:
                conn.execute(f"TRUNCATE {table}")


def store_rows(store: BaseStore, sql: str) -> list[tuple]:
    """Rows of a raw SQL query against the database behind a SQLite or Postgres store."""
    if isinstance(store, SqliteStore):
        return [tuple(row) for row in store.conn.execute(sql).fetchall()]
    import psycopg

    with psycopg.connect(DATABASE_OF[store]) as conn:
        return [tuple(row) for row in conn.execute(sql).fetchall()]
