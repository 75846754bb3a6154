"""Atomic claims on page and cluster numbers: two writers of one thread never take the same number.

`PageStore.reserve` finds free numbers by reading the store, which is not enough when two writers
without a shared lock (two worker processes of a deployment, two middleware instances) step two
branches of one thread at the same moment: both see ``p7`` free and the later write replaces the
other's page. `BaseStore` has no put-if-absent, so the claim lives beside the store, where the store
allows one: a row per claimed number in the store's own database (SQLite: one transaction;
Postgres: ``INSERT ... ON CONFLICT DO NOTHING``), keyed by thread, kind and number, holding the digest
of what will be written there. A claim with the same digest is granted again (a retried step writes
the same record); another digest is refused, and the writer takes the next numbers. Any other store
gets claims shared by the process (one dict per store object): safe between writers of one process,
not between processes.

Claims are kept (a claim released after its record was written could be taken by a writer that read
before the write), one small row per page, and dropped with the thread.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langmem_paging.core.effects import adrive, drive

__all__ = ["InProcessClaims", "NumberClaims", "PostgresClaims", "SqliteClaims", "claims_for"]

TABLE = "langmem_paging_claims"

T = TypeVar("T")


class NumberClaims(ABC):
    """Claims of (thread, kind, number) for a digest; sync methods, async ones in a worker thread by
    default."""

    @abstractmethod
    def claim(self, thread_id: str, kind: str, numbers: Sequence[int], digests: Sequence[str]) -> list[bool]:
        """Claim each number for its digest: True where it is now (or already was) claimed for that
        digest, False where another digest holds it."""

    @abstractmethod
    def drop(self, thread_id: str) -> None:
        """Forget a thread's claims (its records are deleted)."""

    async def aclaim(
        self, thread_id: str, kind: str, numbers: Sequence[int], digests: Sequence[str]
    ) -> list[bool]:
        """Async `claim`."""
        return await asyncio.to_thread(self.claim, thread_id, kind, list(numbers), list(digests))

    async def adrop(self, thread_id: str) -> None:
        """Async `drop`."""
        await asyncio.to_thread(self.drop, thread_id)


class InProcessClaims(NumberClaims):
    """Claims shared by the writers of one process (one per store object), by thread."""

    def __init__(self) -> None:
        self._claims: dict[str, dict[tuple[str, int], str]] = {}
        self._lock = threading.Lock()

    def claim(self, thread_id: str, kind: str, numbers: Sequence[int], digests: Sequence[str]) -> list[bool]:
        with self._lock:
            held = self._claims.setdefault(thread_id, {})
            return [held.setdefault((kind, n), d) == d for n, d in zip(numbers, digests, strict=True)]

    def drop(self, thread_id: str) -> None:
        with self._lock:
            self._claims.pop(thread_id, None)


class SqliteClaims(NumberClaims):
    """Claims in a SQLite database, on the store's connection and lock (one transaction each)."""

    def __init__(self, conn: sqlite3.Connection, lock: Any) -> None:
        self._conn, self._lock = conn, lock
        with self._lock:
            self._conn.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (thread_id TEXT NOT NULL, kind TEXT NOT NULL, "
                "number INTEGER NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (thread_id, kind, number))"
            )

    def claim(self, thread_id: str, kind: str, numbers: Sequence[int], digests: Sequence[str]) -> list[bool]:
        rows = [(thread_id, kind, n, d) for n, d in zip(numbers, digests, strict=True)]
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany(f"INSERT OR IGNORE INTO {TABLE} VALUES (?, ?, ?, ?)", rows)
                held = dict(
                    self._conn.execute(
                        f"SELECT number, digest FROM {TABLE} WHERE thread_id = ? AND kind = ? AND number IN "
                        f"({','.join('?' * len(numbers))})",
                        (thread_id, kind, *numbers),
                    ).fetchall()
                )
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")
        return [held.get(n) == d for n, d in zip(numbers, digests, strict=True)]

    def drop(self, thread_id: str) -> None:
        with self._lock:
            self._conn.execute(f"DELETE FROM {TABLE} WHERE thread_id = ?", (thread_id,))


_POSTGRES_DDL = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (thread_id TEXT NOT NULL, kind TEXT NOT NULL, "
    "number INTEGER NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (thread_id, kind, number))"
)
_POSTGRES_CLAIM = (
    f"WITH wanted AS (SELECT * FROM unnest(%s::int[], %s::text[]) AS w(number, digest)), "
    f"ins AS (INSERT INTO {TABLE} (thread_id, kind, number, digest) "
    f"SELECT %s, %s, number, digest FROM wanted ON CONFLICT DO NOTHING RETURNING number, digest) "
    f"SELECT number, digest FROM ins UNION ALL SELECT c.number, c.digest FROM {TABLE} c "
    f"JOIN wanted w ON c.number = w.number WHERE c.thread_id = %s AND c.kind = %s "
    f"AND c.number NOT IN (SELECT number FROM ins)"
)


class PostgresClaims(NumberClaims):
    """Claims in the Postgres database of a `PostgresStore` or `AsyncPostgresStore` (its cursors): one
    statement inserts what is free and reads what another writer holds."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._ready = False
        self._async = type(store).__name__ == "AsyncPostgresStore"

    def _params(
        self, thread_id: str, kind: str, numbers: Sequence[int], digests: Sequence[str]
    ) -> tuple[Any, ...]:
        return (list(numbers), list(digests), thread_id, kind, thread_id, kind)

    def claim(self, thread_id: str, kind: str, numbers: Sequence[int], digests: Sequence[str]) -> list[bool]:
        if self._async:  # an AsyncPostgresStore from sync code: on its own loop, as its sync methods do
            loop = self._store.loop
            return asyncio.run_coroutine_threadsafe(
                self.aclaim(thread_id, kind, numbers, digests), loop
            ).result()
        return self._execute(self._claim(thread_id, kind, numbers, digests))

    async def aclaim(
        self, thread_id: str, kind: str, numbers: Sequence[int], digests: Sequence[str]
    ) -> list[bool]:
        if not self._async:
            return await super().aclaim(thread_id, kind, numbers, digests)
        return await self._aexecute(self._claim(thread_id, kind, numbers, digests))

    def drop(self, thread_id: str) -> None:
        if self._async:
            asyncio.run_coroutine_threadsafe(self.adrop(thread_id), self._store.loop).result()
            return
        self._execute(self._drop(thread_id))

    async def adrop(self, thread_id: str) -> None:
        if not self._async:
            await super().adrop(thread_id)
            return
        await self._aexecute(self._drop(thread_id))

    # -- one source for both: generators of statements, run on a sync or an async cursor --------
    def _claim(
        self, thread_id: str, kind: str, numbers: Sequence[int], digests: Sequence[str]
    ) -> _Work[list[bool]]:
        if not self._ready:
            yield _Statement(_POSTGRES_DDL, creates=True)
            self._ready = True
        rows = yield _Statement(_POSTGRES_CLAIM, self._params(thread_id, kind, numbers, digests), fetch=True)
        held = _held(rows)
        return [held.get(n) == d for n, d in zip(numbers, digests, strict=True)]

    def _drop(self, thread_id: str) -> _Work[None]:
        if not self._ready:  # a thread deleted before anything was claimed: no table to create for it
            (found,) = yield _Statement("SELECT to_regclass(%s) IS NOT NULL AS found", (TABLE,), fetch=True)
            if not (found["found"] if isinstance(found, dict) else found[0]):
                return
        yield _Statement(f"DELETE FROM {TABLE} WHERE thread_id = %s", (thread_id,))

    def _execute(self, work: _Work[T]) -> T:
        with self._store._cursor() as cur:

            def execute(statement: _Statement) -> list[Any]:
                lost_race = _created_meanwhile() if statement.creates else ()
                try:
                    cur.execute(statement.sql, statement.params)
                except lost_race:
                    return []
                return cur.fetchall() if statement.fetch else []

            return drive(work, execute)

    async def _aexecute(self, work: _Work[T]) -> T:
        async with self._store._cursor() as cur:

            async def execute(statement: _Statement) -> list[Any]:
                lost_race = _created_meanwhile() if statement.creates else ()
                try:
                    await cur.execute(statement.sql, statement.params)
                except lost_race:
                    return []
                return await cur.fetchall() if statement.fetch else []

            return await adrive(work, execute)


@dataclass(frozen=True)
class _Statement:
    """One statement of a claims operation."""

    sql: str
    """The SQL."""
    params: tuple[Any, ...] = ()
    """Its parameters."""
    fetch: bool = False
    """Whether its rows are the answer (else the answer is ``[]``)."""
    creates: bool = False
    """A ``CREATE ... IF NOT EXISTS`` that may lose the race to another creator (workers, or tasks of
    one process: 50 threads stepped at once on one `AsyncPostgresStore` failed with a duplicate
    pg_type key): losing it means the table exists."""


_Work = Generator[_Statement, list[Any], T]
"""A claims operation: statements yielded, each answered by its rows."""


def _created_meanwhile() -> tuple[type[Exception], ...]:
    """The errors of a ``CREATE TABLE IF NOT EXISTS`` that lost the race to another creator: the
    duplicate key of its row type in pg_type, the table, or the type itself (``type ... already
    exists``, seen once in CI: DuplicateObject)."""
    import psycopg

    return (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable, psycopg.errors.DuplicateObject)


def _held(rows: Sequence[Any]) -> dict[int, str]:
    """``{number: digest}`` from rows as tuples or as the stores' dict rows."""
    return (
        {int(r["number"]): r["digest"] for r in rows}
        if rows and isinstance(rows[0], dict)
        else {int(n): d for n, d in rows}
    )


_CLAIMS: weakref.WeakKeyDictionary[Any, NumberClaims] = weakref.WeakKeyDictionary()
_CLAIMS_LOCK = threading.Lock()


def claims_for(store: Any) -> NumberClaims:
    """The claims of a store (one per store object): in its database where it has one, else shared
    by the process."""
    with _CLAIMS_LOCK:
        claims = _CLAIMS.get(store)
        if claims is None:
            claims = _CLAIMS[store] = _new_claims(store)
        return claims


def _new_claims(store: Any) -> NumberClaims:
    kind = type(store).__name__
    conn = getattr(store, "conn", None)
    if kind == "SqliteStore" and isinstance(conn, sqlite3.Connection) and hasattr(store, "lock"):
        return SqliteClaims(conn, store.lock)
    if kind in ("PostgresStore", "AsyncPostgresStore") and hasattr(store, "_cursor"):
        return PostgresClaims(store)
    return InProcessClaims()
