"""Passage search in PostgreSQL full-text search: one index for every worker of a deployment.

`InMemoryBM25Index` lives in the process: with several workers (a LangGraph server deployment,
a pool of API processes) each keeps its own copy, built from the store the first time it
searches a thread and extended only with the pages that worker forms, so a worker misses pages
another worker formed since. `PostgresSearchIndex` keeps the passages in a side table next to the
store instead, so every worker searches the same, current index::

    langmem_paging_passages(thread_id, page_id, position, body,
                            tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED)

with a GIN index on ``tsv``. A passage is one message of a page (`message_text`), as in the
in-process index. A query matches a passage holding any of its words (stemmed, stopwords
dropped); passages matching the whole query as `websearch_to_tsquery` reads it (all words,
``"quoted phrases"``, ``-excluded`` words) rank first, then by `ts_rank_cd`.

Pages are indexed when they form, so `has` is always True. Adding a page again replaces its
passages (a retried step, or a page stored again with new content under its id).

Sync and async: every operation is written once, as the statements of one transaction
(`_Statement`), run by a sync or an async executor. Given a sync connection, pool or URI, the
async methods run the sync ones in a worker thread; given an async connection or pool
(`psycopg.AsyncConnection`, `AsyncConnectionPool`), the async methods await it natively and
the sync ones refuse with a message saying so.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from langmem_paging.effects import adrive, drive
from langmem_paging.records import Page, page_number
from langmem_paging.search import Hit, SearchIndex
from langmem_paging.tokens import message_text

__all__ = ["MAX_PASSAGE_CHARS", "PostgresSearchIndex"]

MAX_PASSAGE_CHARS = 100_000
"""Characters of one message that are indexed: a tsvector must stay under 1 MB, and the start of
a huge tool result is what a search can usefully match."""
MAX_QUERY_CHARS = 10_000
T = TypeVar("T")
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

_SEARCH = """
WITH q AS (
    SELECT websearch_to_tsquery({config}, %(query)s) AS q_all,
           (SELECT string_agg('''' || replace(replace(lexeme, '\\', '\\\\'), '''', '\\''') || '''', ' | ')
              FROM unnest(tsvector_to_array(to_tsvector({config}, %(query)s))) AS lexeme)::tsquery AS q_any
)
SELECT page_id, position,
       ts_rank_cd(tsv, q.q_any) + CASE WHEN tsv @@ q.q_all THEN 1 ELSE 0 END AS score
  FROM {table}, q
 WHERE thread_id = %(thread)s AND tsv @@ q.q_any
 ORDER BY score DESC, length(page_id), page_id, position
 LIMIT %(limit)s
"""


def _passages(thread_id: str, pages: Iterable[Page]) -> tuple[list[str], list[tuple[str, str, int, str]]]:
    ids, rows = [], []
    for page in pages:
        ids.append(page.id)
        for position, message in enumerate(page.messages):
            body = message_text(message)[:MAX_PASSAGE_CHARS].replace("\x00", " ")  # text may not hold NUL
            rows.append((thread_id, page.id, position, body))
    return ids, rows


class PostgresSearchIndex(SearchIndex):
    """Per-thread passage search in a PostgreSQL table, shared by every process using the database.

    Args:
        conn: A connection URI (a small `psycopg_pool.ConnectionPool` is opened on first use), a
            psycopg `Connection` (in autocommit mode, as LangGraph's stores use) or `ConnectionPool`,
            or an `AsyncConnection` / `AsyncConnectionPool` (then only the async methods work).
        table: Name of the passage table.
        config: The text search configuration (``english`` stems English words and drops stopwords;
            ``simple`` only lower-cases).
        setup: Create the table and its index on first use if missing.

    Raises:
        ValueError: `table` or `config` is not a plain lower-case SQL name.
        TypeError: `conn` is none of the above.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> index = PostgresSearchIndex(uri)  # doctest: +SKIP
        >>> page = Page(id="p1", messages=[HumanMessage("We adopted a greyhound.", id="a"),
        ...                                AIMessage("Pottery on Tuesday.", id="b")],
        ...             bookmark="[p1:x]", keywords=[], token_count=9, boundary="fixed_2", created_turn=1)
        >>> index.add("thread-1", [page])  # doctest: +SKIP
        >>> [(h.page_id, h.index) for h in index.search("thread-1", "greyhounds", limit=3,
        ...                                             allow=lambda p: True)]  # doctest: +SKIP
        [('p1', 0)]
    """

    def __init__(self, conn: Any, *, table: str = "langmem_paging_passages", config: str = "english",
                 setup: bool = True) -> None:
        for name, value in (("table", table), ("config", config)):
            if not isinstance(value, str) or not _NAME.match(value):
                raise ValueError(f"`{name}` must be a lower-case SQL name (letters, digits, _); got {value!r}.")
        import psycopg
        import psycopg_pool

        self._sync: Any = None
        self._async: Any = None
        self._uri: str | None = None
        if isinstance(conn, str):
            self._uri = conn
        elif isinstance(conn, (psycopg.Connection, psycopg_pool.ConnectionPool)):
            self._sync = conn
        elif isinstance(conn, (psycopg.AsyncConnection, psycopg_pool.AsyncConnectionPool)):
            self._async = conn
        else:
            raise TypeError(
                "`conn` must be a PostgreSQL URI, a psycopg Connection or ConnectionPool, or an "
                f"AsyncConnection or AsyncConnectionPool; got {type(conn).__name__}."
            )
        self.table, self.config = table, config
        self._setup_pending = setup
        self._guard = threading.Lock()
        self._conn_lock = threading.Lock()  # one transaction at a time on a single connection you passed
        self._aconn_lock: asyncio.Lock | None = None
        self._owned_pool: Any = None

    # -- connections ------------------------------------------------------------------
    def _ddl(self) -> list[str]:
        t = self.table
        return [
            f"SELECT pg_advisory_xact_lock(hashtext('{t}'))",  # several workers may set up at once
            f"""CREATE TABLE IF NOT EXISTS {t} (
                    thread_id text NOT NULL,
                    page_id text NOT NULL,
                    position integer NOT NULL,
                    body text NOT NULL,
                    tsv tsvector GENERATED ALWAYS AS (to_tsvector('{self.config}'::regconfig, body)) STORED,
                    PRIMARY KEY (thread_id, page_id, position))""",
            f"CREATE INDEX IF NOT EXISTS {t}_tsv ON {t} USING gin (tsv)",
        ]

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """A sync connection inside a transaction (committed on exit, rolled back on an error)."""
        if self._async is not None:
            raise TypeError("This PostgresSearchIndex was given an async connection: use the async methods "
                            "(`aadd`, `asearch`, ...), or pass a sync connection, pool or URI.")
        with self._guard:
            if self._sync is None:
                from psycopg_pool import ConnectionPool

                self._owned_pool = ConnectionPool(self._uri or "", min_size=1, max_size=4,
                                                  kwargs={"autocommit": True}, open=True)
                self._sync = self._owned_pool
        source = self._sync
        holder = source.connection() if hasattr(source, "getconn") else _borrowed(source, self._conn_lock)
        with holder as conn, conn.transaction():
            if self._setup_pending:
                for statement in self._ddl():
                    conn.execute(statement)
                self._setup_pending = False
            yield conn

    @asynccontextmanager
    async def _aconnection(self) -> AsyncIterator[Any]:
        source = self._async
        if self._aconn_lock is None:
            self._aconn_lock = asyncio.Lock()
        holder = source.connection() if hasattr(source, "getconn") else _aborrowed(source, self._aconn_lock)
        async with holder as conn, conn.transaction():
            if self._setup_pending:
                for statement in self._ddl():
                    await conn.execute(statement)
                self._setup_pending = False
            yield conn

    def close(self) -> None:
        """Close the pool this index opened for a URI (a connection or pool you passed stays open)."""
        if self._owned_pool is not None:
            self._owned_pool.close()
            self._owned_pool = self._sync = None

    # -- one transaction, sync or async ------------------------------------------------------
    def _transact(self, work: Work[T]) -> T:
        with self._connection() as conn:
            return drive(work, lambda statement: _execute(conn, statement))

    async def _atransact(self, work: Work[T]) -> T:
        async with self._aconnection() as conn:
            async def execute(statement: _Statement) -> Any:
                cursor = conn.cursor()
                if statement.many:
                    await cursor.executemany(statement.sql, statement.params)
                    return None
                await cursor.execute(statement.sql, statement.params)
                return await cursor.fetchall() if statement.fetch else None

            return await adrive(work, execute)

    # -- SearchIndex ------------------------------------------------------------------------
    def has(self, thread_id: str) -> bool:
        """Always True: pages are indexed in the database when they form."""
        return True

    async def ahas(self, thread_id: str) -> bool:
        """Async `has`."""
        return True

    def load(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Replace a thread's passages with those of `pages` (e.g. to index pages stored before this
        index was in use)."""
        self._transact(self._load(thread_id, list(pages)))

    async def aload(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Async `load`."""
        if self._async is None:
            return await super().aload(thread_id, pages)
        await self._atransact(self._load(thread_id, list(pages)))

    def add(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Index new pages of a thread; a page indexed before has its passages replaced."""
        self._transact(self._add(thread_id, list(pages)))

    async def aadd(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Async `add`."""
        if self._async is None:
            return await super().aadd(thread_id, pages)
        await self._atransact(self._add(thread_id, list(pages)))

    def update(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Replace the passages of pages whose content changed."""
        self.add(thread_id, pages)

    async def aupdate(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Async `update`."""
        await self.aadd(thread_id, pages)

    def drop(self, thread_id: str) -> None:
        """Delete a thread's passages."""
        self._transact(self._drop(thread_id))

    async def adrop(self, thread_id: str) -> None:
        """Async `drop`."""
        if self._async is None:
            return await super().adrop(thread_id)
        await self._atransact(self._drop(thread_id))

    def search(self, thread_id: str, query: str, *, limit: int, allow: Callable[[str], bool]) -> list[Hit]:
        """The best `limit` passages of pages `allow` accepts, best first."""
        return self._transact(self._search(thread_id, query, limit, allow))

    async def asearch(self, thread_id: str, query: str, *, limit: int,
                      allow: Callable[[str], bool]) -> list[Hit]:
        """Async `search`."""
        if self._async is None:
            return await super().asearch(thread_id, query, limit=limit, allow=allow)
        return await self._atransact(self._search(thread_id, query, limit, allow))

    # -- the statements, written once ---------------------------------------------------------
    def _load(self, thread_id: str, pages: list[Page]) -> Work[None]:
        _, rows = _passages(thread_id, pages)
        yield _Statement(f"DELETE FROM {self.table} WHERE thread_id = %s", (thread_id,))
        if rows:
            yield _Statement(self._insert_sql(), rows, many=True)

    def _add(self, thread_id: str, pages: list[Page]) -> Work[None]:
        ids, rows = _passages(thread_id, pages)
        if not ids:
            return
        yield _Statement(f"DELETE FROM {self.table} WHERE thread_id = %s AND page_id = ANY(%s)", (thread_id, ids))
        if rows:
            yield _Statement(self._insert_sql(), rows, many=True)

    def _drop(self, thread_id: str) -> Work[None]:
        yield _Statement(f"DELETE FROM {self.table} WHERE thread_id = %s", (thread_id,))

    def _search(self, thread_id: str, query: str, limit: int, allow: Callable[[str], bool]) -> Work[list[Hit]]:
        if limit <= 0 or not isinstance(query, str) or not query.strip():
            return []
        fetch = limit * 4
        while True:
            rows = yield _Statement(self._search_sql(), self._search_args(thread_id, query, fetch), fetch=True)
            hits = self._hits(rows, allow)
            if len(hits) >= limit or len(rows) < fetch:
                return hits[:limit]
            fetch *= 4  # the best passages belong to pages the caller may not see: look further

    # -- helpers ----------------------------------------------------------------------------
    def _insert_sql(self) -> str:
        return f"INSERT INTO {self.table} (thread_id, page_id, position, body) VALUES (%s, %s, %s, %s)"

    def _search_sql(self) -> str:
        return _SEARCH.format(config=f"'{self.config}'::regconfig", table=self.table)

    @staticmethod
    def _search_args(thread_id: str, query: str, fetch: int) -> dict[str, Any]:
        return {"thread": thread_id, "query": query[:MAX_QUERY_CHARS].replace("\x00", " "), "limit": fetch}

    @staticmethod
    def _hits(rows: list[Any], allow: Callable[[str], bool]) -> list[Hit]:
        hits = []
        for row in rows:
            page_id, position, score = (row["page_id"], row["position"], row["score"]) if isinstance(row, dict) \
                else row
            page_number(page_id)  # only well-formed ids are ever written; a bad row is a corrupt table
            if allow(page_id):
                hits.append(Hit(page_id, int(position), float(score)))
        return hits


@dataclass(frozen=True)
class _Statement:
    """One SQL statement of an operation: executed (`many`: once per row), its rows fetched if `fetch`."""

    sql: str
    params: Any
    many: bool = False
    fetch: bool = False


Work = Generator[_Statement, Any, T]
"""An index operation written once: the statements of one transaction, run sync or async."""


def _execute(conn: Any, statement: _Statement) -> Any:
    cursor = conn.cursor()
    if statement.many:
        cursor.executemany(statement.sql, statement.params)
        return None
    cursor.execute(statement.sql, statement.params)
    return cursor.fetchall() if statement.fetch else None


@contextmanager
def _borrowed(conn, lock: threading.Lock):
    """A connection the caller owns (not closed on exit), one transaction at a time."""
    with lock:
        yield conn


@asynccontextmanager
async def _aborrowed(conn, lock: asyncio.Lock):
    async with lock:
        yield conn
