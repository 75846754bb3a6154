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

A step claims its numbers when it writes its records (`write`): `PageStore.reserve` only reads (the
records and the claims held, skipping numbers another digest holds), and `PageStore.commit` claims
and writes in one go, answering False (nothing written) when another writer claimed one of the
numbers since. On SQLite and Postgres the claims and the records are one transaction of the store's
connection: one durable commit per paging step (a claim was its own transaction before the records',
the cost of two: 43 ms of a 139 ms search turn on a SQLite file). Elsewhere (in-process claims) the
claims are made first, then the records written.

Claims are kept (a claim released after its record was written could be taken by a writer that read
before the write), one small row per page, and dropped with the thread.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from langgraph.store.base import GetOp, Op

from langmem_paging.core.effects import adrive, drive
from langmem_paging.core.records import Page
from langmem_paging.index.base import SearchIndex
from langmem_paging.index.postgres import PostgresSearchIndex
from langmem_paging.index.sqlite import SqliteSearchIndex
from langmem_paging.index.store_classes import ensure_setup, store_class, store_cursor, store_row, write_puts

__all__ = [
    "ClaimedWrite",
    "Guard",
    "InProcessClaims",
    "NumberClaims",
    "Passages",
    "PostgresClaims",
    "SqliteClaims",
    "Wanted",
    "claims_for",
]

TABLE = "langmem_paging_claims"

T = TypeVar("T")

Wanted = tuple[str, int, str]
"""A number a write claims: (kind, number, digest of the record written there)."""


@dataclass(frozen=True)
class Passages:
    """What a write indexes in its transaction: pages of the thread, into an index the claims join
    (`NumberClaims.joins`)."""

    index: SearchIndex
    """The index, on the store's own connection."""
    pages: list[Page]
    """The pages (a step's new pages, and those of a gap below them)."""


@dataclass(frozen=True)
class Guard:
    """A store item a write reads again in its transaction, before it writes: the thread's lifecycle
    record as the commit read it. A forget landing since changed it, and the write is refused (the
    step goes again, from the records): on SQLite the transaction holds the database's write lock, on
    Postgres the row is read ``FOR SHARE``, so a forget's write waits for the commit and its read of
    the records then sees the new page. In-process claims read it just before writing."""

    namespace: tuple[str, ...]
    key: str
    generation: str | None
    """The record's generation as the commit read it (None: no record)."""

    def holds(self, value: Mapping[str, Any] | None) -> bool:
        return (value or {}).get("generation") == self.generation

    def get(self) -> list[Op]:
        return [GetOp(self.namespace, self.key)]


@dataclass(frozen=True)
class ClaimedWrite:
    """A request of a store operation: claim `wanted` and write `ops`, and `passages` (`NumberClaims.write`:
    one transaction where the store allows it); answered with ``[True]``, or ``[False]`` when another
    writer holds one of the numbers or `guard` no longer holds (nothing written)."""

    thread_id: str
    wanted: list[Wanted]
    ops: list[Op]
    passages: Passages | None = None
    guard: Guard | None = None


def _of_kind(kind: str, numbers: Sequence[int], digests: Sequence[str]) -> list[Wanted]:
    return [(kind, n, d) for n, d in zip(numbers, digests, strict=True)]


def _granted(wanted: Sequence[Wanted], held: Mapping[tuple[str, int], str]) -> list[bool]:
    """For each wanted number, whether its digest holds it."""
    return [held.get((kind, number)) == digest for kind, number, digest in wanted]


def _by_kind(wanted: Sequence[Wanted]) -> dict[str, tuple[list[int], list[str]]]:
    groups: dict[str, tuple[list[int], list[str]]] = {}
    for kind, number, digest in wanted:
        numbers, digests = groups.setdefault(kind, ([], []))
        numbers.append(number)
        digests.append(digest)
    return groups


class NumberClaims(ABC):
    """Claims of (thread, kind, number) for a digest; sync methods, async ones in a worker thread by
    default."""

    def joins(self, index: SearchIndex) -> bool:
        """Whether `index` writes in the transaction of the records (`write`): its rows live in the
        store's own database, on the store's own connection (FTS5 on a `SqliteStore`'s connection,
        Postgres tables on a `PostgresStore`'s connection or pool), so a step's passages commit with
        its records and claims, one durable commit per store. The rule's one home: False here (no
        transaction of the store's); an index elsewhere is written after the commit (`IndexPages`)."""
        return False

    @abstractmethod
    def claim(self, thread_id: str, kind: str, numbers: Sequence[int], digests: Sequence[str]) -> list[bool]:
        """Claim each number for its digest: True where it is now (or already was) claimed for that
        digest, False where another digest holds it."""

    @abstractmethod
    def held(self, thread_id: str, kind: str, numbers: Sequence[int]) -> dict[int, str]:
        """The digests holding `numbers` (claimed ones only): a read, nothing claimed."""

    @abstractmethod
    def drop(self, thread_id: str) -> None:
        """Forget a thread's claims (its records are deleted)."""

    def write(self, request: ClaimedWrite, batch: Callable[[Sequence[Op]], Any]) -> bool:
        """Check the request's guard, claim its numbers, then write its ops with `batch` (and, for claims
        that join the index, its passages, in the same transaction); False, with nothing written, when
        the guard no longer holds or another digest holds one of the numbers."""
        _not_joined(self, request.passages)
        guard, thread_id = request.guard, request.thread_id
        if guard is not None and not guard.holds(_value(batch(guard.get())[0])):
            return False
        if not all(
            all(self.claim(thread_id, kind, *group)) for kind, group in _by_kind(request.wanted).items()
        ):
            return False
        batch(request.ops)
        return True

    async def awrite(self, request: ClaimedWrite, abatch: Callable[[Sequence[Op]], Awaitable[Any]]) -> bool:
        """Async `write`."""
        _not_joined(self, request.passages)
        guard = request.guard
        if guard is not None and not guard.holds(_value((await abatch(guard.get()))[0])):
            return False
        for kind, group in _by_kind(request.wanted).items():
            if not all(await self.aclaim(request.thread_id, kind, *group)):
                return False
        await abatch(request.ops)
        return True

    async def aheld(self, thread_id: str, kind: str, numbers: Sequence[int]) -> dict[int, str]:
        """Async `held`."""
        return await asyncio.to_thread(self.held, thread_id, kind, list(numbers))

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

    def held(self, thread_id: str, kind: str, numbers: Sequence[int]) -> dict[int, str]:
        with self._lock:
            claims = self._claims.get(thread_id, {})
            return {n: claims[kind, n] for n in numbers if (kind, n) in claims}

    def drop(self, thread_id: str) -> None:
        with self._lock:
            self._claims.pop(thread_id, None)


class TransactionClaims(NumberClaims):
    """Claims in the store's own database: `write` checks the guard, claims and writes the records (and
    joined passages) in one transaction of the store's connection (`_write`), never through `batch`."""

    @abstractmethod
    def _write(self, request: ClaimedWrite) -> bool:
        """`write` in one transaction; False (rolled back) when refused."""

    async def _awrite(self, request: ClaimedWrite) -> bool:
        return await asyncio.to_thread(self._write, request)

    def write(self, request: ClaimedWrite, batch: Callable[[Sequence[Op]], Any]) -> bool:
        return self._write(request)

    async def awrite(self, request: ClaimedWrite, abatch: Callable[[Sequence[Op]], Awaitable[Any]]) -> bool:
        return await self._awrite(request)


class SqliteClaims(TransactionClaims):
    """Claims in a `SqliteStore`'s database, on its connection and lock; `write` claims and writes the
    records in one transaction."""

    def __init__(self, store: Any) -> None:
        self._store, self._conn, self._lock = store, store.conn, store.lock
        with self._lock:
            self._conn.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (thread_id TEXT NOT NULL, kind TEXT NOT NULL, "
                "number INTEGER NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (thread_id, kind, number))"
            )

    def joins(self, index: SearchIndex) -> bool:
        return isinstance(index, SqliteSearchIndex) and index.on(self._conn)

    def claim(self, thread_id: str, kind: str, numbers: Sequence[int], digests: Sequence[str]) -> list[bool]:
        with self._lock, self._transaction():
            return self._claim(thread_id, _of_kind(kind, numbers, digests))

    def _write(self, request: ClaimedWrite) -> bool:
        ensure_setup(self._store)
        thread_id, passages, guard = request.thread_id, request.passages, request.guard
        with self._lock, self._transaction() as cursor:
            if guard is not None and not guard.holds(_sqlite_value(cursor, guard)):
                raise _Refused
            if not all(self._claim(thread_id, request.wanted)):
                raise _Refused
            # the store's own writer, on this transaction (`SqliteStore.batch` would open another)
            write_puts(self._store, request.ops, cursor)
            if passages is not None:  # `joins`: the index on this connection, this lock held
                cast(SqliteSearchIndex, passages.index).add_in_transaction(thread_id, passages.pages)
            return True
        return False  # refused: rolled back, nothing claimed or written

    def held(self, thread_id: str, kind: str, numbers: Sequence[int]) -> dict[int, str]:
        with self._lock:
            held = self._held(thread_id, [kind], numbers)
        return {number: digest for (_, number), digest in held.items()}

    def drop(self, thread_id: str) -> None:
        with self._lock:
            self._conn.execute(f"DELETE FROM {TABLE} WHERE thread_id = ?", (thread_id,))

    def _claim(self, thread_id: str, wanted: Sequence[Wanted]) -> list[bool]:
        """Claim `wanted` (numbers of every kind at once: one insert, one read)."""
        self._conn.executemany(
            f"INSERT OR IGNORE INTO {TABLE} VALUES (?, ?, ?, ?)", [(thread_id, *w) for w in wanted]
        )
        kinds, numbers = {k for k, _, _ in wanted}, {n for _, n, _ in wanted}
        return _granted(wanted, self._held(thread_id, sorted(kinds), sorted(numbers)))

    def _held(
        self, thread_id: str, kinds: Sequence[str], numbers: Sequence[int]
    ) -> dict[tuple[str, int], str]:
        rows = self._conn.execute(
            f"SELECT kind, number, digest FROM {TABLE} WHERE thread_id = ? AND kind IN "
            f"({','.join('?' * len(kinds))}) AND number IN ({','.join('?' * len(numbers))})",
            (thread_id, *kinds, *numbers),
        ).fetchall()
        return _digests_by_number(rows)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Cursor]:
        """One write transaction, taken at once (hold the lock); rolled back on an error or a refusal."""
        self._conn.execute("BEGIN IMMEDIATE")
        cursor = self._conn.cursor()
        try:
            yield cursor
        except _Refused:
            self._conn.execute("ROLLBACK")
            return
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        finally:
            cursor.close()
        self._conn.execute("COMMIT")


def _not_joined(claims: NumberClaims, passages: Passages | None) -> None:
    if passages is not None:
        raise ValueError(f"{type(claims).__name__} writes no passages in its transaction (`joins`)")


def _postgres(passages: Passages) -> PostgresSearchIndex:
    return cast(PostgresSearchIndex, passages.index)  # `PostgresClaims.joins`


def _value(item: Any) -> Mapping[str, Any] | None:
    return item.value if item is not None else None


def _sqlite_value(cursor: sqlite3.Cursor, guard: Guard) -> Mapping[str, Any] | None:
    row = cursor.execute(*store_row("sqlite", guard.namespace, guard.key)).fetchone()
    return json.loads(row[0]) if row is not None else None


@contextmanager
def _refused(request: ClaimedWrite) -> Iterator[None]:
    """Around a write's transaction: a refusal ends it (the caller answers False); on any other error
    the joined index forgets what it noted of the thread."""
    try:
        yield
    except _Refused:
        return
    except BaseException:
        if request.passages is not None:
            _postgres(request.passages).rolled_back(request.thread_id)
        raise


class _Refused(Exception):
    """Another digest holds a number a write claims: its transaction is rolled back."""


_POSTGRES_DDL = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (thread_id TEXT NOT NULL, kind TEXT NOT NULL, "
    "number INTEGER NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (thread_id, kind, number))"
)
_POSTGRES_CLAIM = (
    f"WITH wanted AS (SELECT * FROM unnest(%s::text[], %s::int[], %s::text[]) AS w(kind, number, digest)), "
    f"ins AS (INSERT INTO {TABLE} (thread_id, kind, number, digest) "
    f"SELECT %s, kind, number, digest FROM wanted ON CONFLICT DO NOTHING RETURNING kind, number, digest) "
    f"SELECT kind, number, digest FROM ins UNION ALL SELECT c.kind, c.number, c.digest FROM {TABLE} c "
    f"JOIN wanted w ON c.kind = w.kind AND c.number = w.number WHERE c.thread_id = %s "
    f"AND (c.kind, c.number) NOT IN (SELECT kind, number FROM ins)"
)
"""Claim numbers of every kind in one statement: insert what is free, read what another writer holds."""


class PostgresClaims(TransactionClaims):
    """Claims in the Postgres database of a `PostgresStore` or `AsyncPostgresStore` (its cursors): one
    statement inserts what is free and reads what another writer holds; `write` claims and writes the
    records in one transaction."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._ready = False
        self._async = store_class(store) == "async-postgres"

    def joins(self, index: SearchIndex) -> bool:
        return isinstance(index, PostgresSearchIndex) and index.on(self._store.conn)

    # an AsyncPostgresStore from sync code runs on its own loop, as its sync methods do (`_execute`)
    def claim(self, thread_id: str, kind: str, numbers: Sequence[int], digests: Sequence[str]) -> list[bool]:
        return self._execute(self._claim(thread_id, _of_kind(kind, numbers, digests)))

    async def aclaim(
        self, thread_id: str, kind: str, numbers: Sequence[int], digests: Sequence[str]
    ) -> list[bool]:
        return await self._aexecute(self._claim(thread_id, _of_kind(kind, numbers, digests)))

    def held(self, thread_id: str, kind: str, numbers: Sequence[int]) -> dict[int, str]:
        return self._execute(self._held(thread_id, kind, numbers))

    async def aheld(self, thread_id: str, kind: str, numbers: Sequence[int]) -> dict[int, str]:
        return await self._aexecute(self._held(thread_id, kind, numbers))

    def drop(self, thread_id: str) -> None:
        self._execute(self._drop(thread_id))

    async def adrop(self, thread_id: str) -> None:
        await self._aexecute(self._drop(thread_id))

    def _write(self, request: ClaimedWrite) -> bool:
        self._execute(self._create())  # outside the transaction: a lost create race must not abort it
        with _refused(request):
            return self._execute(self._writes(request), transaction=True)
        return False

    async def _awrite(self, request: ClaimedWrite) -> bool:
        await self._aexecute(self._create())
        with _refused(request):
            return await self._aexecute(self._writes(request), transaction=True)
        return False

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """A cursor in a transaction of the store's connection (as the store's own cursors are made)."""
        from langgraph.checkpoint.postgres import _internal
        from psycopg.rows import dict_row

        store = self._store
        with _internal.get_connection(store.conn) as conn:
            lock = store.lock if not hasattr(store.conn, "getconn") else nullcontext()
            with lock, conn.transaction(), conn.cursor(binary=True, row_factory=dict_row) as cur:
                yield cur

    @asynccontextmanager
    async def _atransaction(self) -> AsyncIterator[Any]:
        from langgraph.checkpoint.postgres import _ainternal
        from psycopg.rows import dict_row

        store = self._store
        async with _ainternal.get_connection(store.conn) as conn:
            lock = store.lock if not hasattr(store.conn, "getconn") else nullcontext()
            async with lock, conn.transaction(), conn.cursor(binary=True, row_factory=dict_row) as cur:
                yield cur

    # -- one source for both: generators of statements, run on a sync or an async cursor --------
    def _claim(self, thread_id: str, wanted: Sequence[Wanted]) -> _Work[list[bool]]:
        """Claim `wanted` (numbers of every kind at once: one statement, one round trip)."""
        yield from self._create()
        kinds, numbers, digests = (
            (list(column) for column in zip(*wanted, strict=True)) if wanted else ([], [], [])
        )
        rows = yield _Statement(_POSTGRES_CLAIM, (kinds, numbers, digests, thread_id, thread_id), fetch=True)
        return _granted(wanted, _digests_by_number(rows))

    def _create(self) -> _Work[None]:
        if not self._ready:
            yield _Statement(_POSTGRES_DDL, creates=True)
            self._ready = True

    def _writes(self, request: ClaimedWrite) -> _Work[bool]:
        """Check the guard, claim the numbers, then write the records and passages (in the caller's
        transaction); raises `_Refused` when the guard no longer holds or another digest holds a number."""
        if request.guard is not None:
            guard = request.guard
            rows = yield _Statement(*store_row("postgres", guard.namespace, guard.key), fetch=True)
            if not guard.holds(rows[0]["value"] if rows else None):
                raise _Refused
        granted = yield from self._claim(request.thread_id, request.wanted)
        if not all(granted):
            raise _Refused
        yield request  # its records and passages, on this transaction's cursor
        return True

    def _held(self, thread_id: str, kind: str, numbers: Sequence[int]) -> _Work[dict[int, str]]:
        yield from self._create()
        rows = yield _Statement(
            f"SELECT kind, number, digest FROM {TABLE} WHERE thread_id = %s AND kind = %s AND number = ANY(%s)",
            (thread_id, kind, list(numbers)),
            fetch=True,
        )
        return {number: digest for (_, number), digest in _digests_by_number(rows).items()}

    def _drop(self, thread_id: str) -> _Work[None]:
        if not self._ready:  # a thread deleted before anything was claimed: no table to create for it
            (found,) = yield _Statement("SELECT to_regclass(%s) IS NOT NULL AS found", (TABLE,), fetch=True)
            if not (found["found"] if isinstance(found, dict) else found[0]):
                return
        yield _Statement(f"DELETE FROM {TABLE} WHERE thread_id = %s", (thread_id,))

    def _execute(self, work: _Work[T], *, transaction: bool = False) -> T:
        """Run `work` on a cursor of the store (`transaction`: in one transaction of its connection)."""
        if self._async:
            loop = self._store.loop
            return asyncio.run_coroutine_threadsafe(
                self._aexecute(work, transaction=transaction), loop
            ).result()
        with self._transaction() if transaction else store_cursor(self._store) as cur:

            def execute(step: _Statement | ClaimedWrite) -> list[Any]:
                if isinstance(step, ClaimedWrite):
                    write_puts(self._store, step.ops, cur)  # the store's own writer, here
                    if step.passages is not None:
                        _postgres(step.passages).add_on(cur, step.thread_id, step.passages.pages)
                    return []
                lost_race = _created_meanwhile() if step.creates else ()
                try:
                    cur.execute(step.sql, step.params)
                except lost_race:
                    return []
                return cur.fetchall() if step.fetch else []

            return drive(work, execute)

    async def _aexecute(self, work: _Work[T], *, transaction: bool = False) -> T:
        if not self._async:
            return await asyncio.to_thread(self._execute, work, transaction=transaction)
        async with self._atransaction() if transaction else store_cursor(self._store) as cur:

            async def execute(step: _Statement | ClaimedWrite) -> list[Any]:
                if isinstance(step, ClaimedWrite):
                    await write_puts(self._store, step.ops, cur)
                    if step.passages is not None:
                        await _postgres(step.passages).aadd_on(cur, step.thread_id, step.passages.pages)
                    return []
                lost_race = _created_meanwhile() if step.creates else ()
                try:
                    await cur.execute(step.sql, step.params)
                except lost_race:
                    return []
                return await cur.fetchall() if step.fetch else []

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


_Work = Generator[_Statement | ClaimedWrite, list[Any], T]
"""A claims operation: statements yielded, each answered by its rows."""


def _created_meanwhile() -> tuple[type[Exception], ...]:
    """The errors of a ``CREATE TABLE IF NOT EXISTS`` that lost the race to another creator: the
    duplicate key of its row type in pg_type, the table, or the type itself (``type ... already
    exists``, seen once in CI: DuplicateObject)."""
    import psycopg

    return (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable, psycopg.errors.DuplicateObject)


def _digests_by_number(rows: Sequence[Any]) -> dict[tuple[str, int], str]:
    """``{(kind, number): digest}`` from rows ``(kind, number, digest)`` as tuples or as the stores'
    dict rows."""
    return {
        (kind, int(number)): digest
        for kind, number, digest in (tuple(row.values()) if isinstance(row, dict) else row for row in rows)
    }


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
    kind = store_class(store)
    if kind == "sqlite":
        return SqliteClaims(store)
    return PostgresClaims(store) if kind is not None else InProcessClaims()
