"""Passage search in PostgreSQL full-text search: one index for every worker of a deployment.

`InMemoryBM25Index` lives in the process: with several workers (a LangGraph server deployment,
a pool of API processes) each keeps its own copy, built from the store the first time it
searches a thread and extended only with the pages that worker forms, so a worker misses pages
another worker formed since. `PostgresSearchIndex` keeps the passages in a side table next to the
store instead, so every worker searches the same, current index::

    langmem_paging_passages(thread_id, page_id, position, body,
                            tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', body)) STORED)
    langmem_paging_passages_terms(thread_id, lexeme, docs)   -- per-thread document frequencies
    langmem_paging_passages_threads(thread_id, through)      -- the threads it holds, and how far

with a GIN index on ``tsv``. It is the default index of a `PostgresStore` or `AsyncPostgresStore`
(`for_store`, picked by `langmem_paging.index.defaults.default_index`): on the store's own connection
or pool, each passage tied to its page record in the store's table (a generated ``prefix`` column and
a foreign key with ``ON DELETE CASCADE``, `langmem_paging.index.store_tables`), so a record deleted by
anyone (the store's API, the Agent Server deleting a thread, the TTL sweep) takes its passages along.
A passage is one message of a page (`message_text`), as in the
in-process index, its text escaped by `records.escape_text` (PostgreSQL text refuses NUL and
surrogates; the escape keeps every other character, so nothing is dropped). A query matches a
passage holding any of its selective words (stemmed, stopwords dropped; a word in more than
`COMMON_SHARE` of the thread's passages is left out while rarer ones remain, the rarest always
kept); passages matching the whole query as `websearch_to_tsquery` reads it (all words,
``"quoted phrases"``, ``-excluded`` words) rank first, then by `ts_rank_cd`. A search is one
prepared statement, one round trip, and ranks only those candidates.

The frequency table is the thread's own (one tenant's words never change which of another's are
"common"), moved by statement triggers on the passage table (`_COUNT_ADDED`, `_COUNT_REMOVED`), so it
agrees with the passages whoever adds or removes them (the cascade included). Writes to one thread
are serialized by a transaction-scoped advisory lock and insert with
``ON CONFLICT DO NOTHING``: two workers indexing the same page (several processes stepping one
thread) both succeed, and the page is indexed once. The tables, triggers and key are made on first
use under an advisory lock (workers starting at once queue); the search function made last carries a
mark of this version's setup, so a worker's first call reads one row and skips the rest.

The threads table records each thread the index holds and the highest page number up to which it
holds every stored page (`indexed_through`), written in the same transaction as the passages: a
thread it never held (pages stored before it was in use, an import) is loaded by its first search,
and a page whose index write failed is indexed by the next step or search that finds the gap, in
any process. A search reads it in the same statement as the passages (`_search`) and the index
object keeps the last value it read or wrote (`THROUGH_CACHE` threads) for `indexed_through` to
answer from, so the search path (`indexed_through`, then `search`) stays one round trip (the
separate read cost 0.16-0.19 ms p50 on the test server). Another worker's write (a delete, a
reload) is seen here by the next search at the latest; a stale value only delays a repair by one
search, and a failed transaction leaves nothing cached.
Adding a page again replaces its passages (a retried step, or a page stored again with new content
under its id).

Sync and async: every operation is written once, as the statements of one transaction
(`_Statement`), run by a sync or an async executor. Given a sync connection, pool or URI, the
async methods run the sync ones in a worker thread; given an async connection or pool
(`psycopg.AsyncConnection`, `AsyncConnectionPool`), the async methods await it natively and
the sync ones refuse with a message saying so.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Generator, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from langmem_paging.core.effects import adrive, drive
from langmem_paging.core.lru import LRU
from langmem_paging.core.records import Page, escape_text, page_number
from langmem_paging.core.tokens import message_text
from langmem_paging.index.base import Hit, SearchIndex
from langmem_paging.index.store_classes import store_class
from langmem_paging.index.store_tables import (
    STORE_TABLE,
    check_postgres_store,
    pages_prefix_sql,
    postgres_store_check,
)

__all__ = ["COMMON_MIN", "COMMON_SHARE", "MAX_PASSAGE_CHARS", "PostgresSearchIndex"]

MAX_PASSAGE_CHARS = 100_000
"""Characters of one message that are indexed: a tsvector must stay under 1 MB, and the start of
a huge tool result is what a search can usefully match."""
MAX_QUERY_CHARS = 10_000
COMMON_SHARE = 0.02
"""A query word in more than this share of the thread's passages (and in more than `COMMON_MIN` of
them) is left out of the candidates while rarer words remain, as `SqliteSearchIndex` does: it adds
little to the ranking and would make every passage holding it a candidate to score."""
COMMON_MIN = 2000
THROUGH_CACHE = 4096
"""Threads whose `indexed_through` one index object keeps between calls (least recently used
dropped): what lets the search path skip a round trip for it."""
T = TypeVar("T")
_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,55}$")  # room for a "_search" suffix in 63 characters

# The frequency table keeps the thread's passage count under the lexeme '' (no word stems to it).
# A search is one call of this function (one round trip): it reads the query's per-thread document
# frequencies, keeps the selective words (the rarest always), and ranks only the passages holding
# them, found through the GIN index (the tsquery a constant of the candidate query, bitmap scans only:
# planned with an unknown tsquery, or with no statistics yet, PostgreSQL scans every passage).
_SEARCH_FUNCTION = """
CREATE OR REPLACE FUNCTION {function}(thread text, query text, lim integer, common_min integer,
                                      common_share double precision)
RETURNS TABLE (page_id text, "position" integer, score double precision)
LANGUAGE plpgsql STABLE
-- only the GIN index finds the candidates (the OFFSET 0 keeps the thread's condition off that scan):
-- without statistics (a table just filled, before autovacuum analyzed it) the planner would read
-- every passage of the thread to rank a few
SET enable_seqscan = off SET enable_indexscan = off
AS $body$
DECLARE
    q_any tsquery;
    total integer;
BEGIN
    SELECT coalesce(max(f.docs), 0) INTO total FROM {terms} f WHERE f.thread_id = thread AND f.lexeme = '';
    SELECT string_agg('''' || replace(replace(d.lexeme, '\\', '\\\\'), '''', '\\''') || '''', ' | ')::tsquery
      INTO q_any
      FROM (SELECT w.lexeme, coalesce(f.docs, 0) AS docs,
                   row_number() OVER (ORDER BY coalesce(f.docs, 0), w.lexeme) AS k
              FROM (SELECT DISTINCT l AS lexeme FROM unnest(tsvector_to_array(to_tsvector({config}, query))) AS l) w
              LEFT JOIN {terms} f ON f.thread_id = thread AND f.lexeme = w.lexeme) d
     WHERE d.k = 1 OR d.docs <= greatest(common_min, common_share * total);
    IF q_any IS NULL THEN
        RETURN;
    END IF;
    RETURN QUERY EXECUTE format(
        'SELECT c.page_id, c.position, '
        '       ts_rank_cd(c.tsv, $1)::double precision + CASE WHEN c.tsv @@ $2 THEN 1 ELSE 0 END AS score'
        '  FROM (SELECT p.thread_id, p.page_id, p.position, p.tsv FROM {table} p'
        '         WHERE p.tsv @@ %L::tsquery OFFSET 0) c'
        ' WHERE c.thread_id = $3'
        ' ORDER BY score DESC, length(c.page_id), c.page_id, c.position LIMIT $4', q_any::text)
        USING q_any, websearch_to_tsquery({config}, query), thread, lim;
END
$body$
"""

# The thread's frequencies follow its passages by triggers on the passage table (one statement per
# insert or delete, over the rows it touched), so they agree with the passages whoever removes them: the
# library, or the store deleting a page record (the foreign key's cascade). A removed word leaves no row
# behind (forget means gone).
_COUNT_ADDED = """
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    INSERT INTO {terms} AS f (thread_id, lexeme, docs)
    SELECT d.thread_id, d.lexeme, d.n FROM (
        SELECT thread_id, lexeme, count(*) AS n FROM new_rows, unnest(tsvector_to_array(tsv)) AS lexeme
         GROUP BY thread_id, lexeme
        UNION ALL SELECT thread_id, '', count(*) FROM new_rows GROUP BY thread_id) d
     ORDER BY d.thread_id, d.lexeme
    ON CONFLICT (thread_id, lexeme) DO UPDATE SET docs = f.docs + excluded.docs;
    RETURN NULL;
END
$body$
"""

_COUNT_REMOVED = """
CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    WITH delta AS (
        SELECT thread_id, lexeme, count(*) AS n FROM old_rows, unnest(tsvector_to_array(tsv)) AS lexeme
         GROUP BY thread_id, lexeme
        UNION ALL SELECT thread_id, '', count(*) FROM old_rows GROUP BY thread_id
    ), dead AS (
        DELETE FROM {terms} f USING delta
         WHERE f.thread_id = delta.thread_id AND f.lexeme = delta.lexeme AND f.docs <= delta.n
    )
    UPDATE {terms} f SET docs = f.docs - delta.n FROM delta
     WHERE f.thread_id = delta.thread_id AND f.lexeme = delta.lexeme AND f.docs > delta.n;
    RETURN NULL;
END
$body$
"""

_TRIGGER = """
CREATE TRIGGER {name} AFTER {event} ON {table} REFERENCING {rows} TABLE AS {alias}
FOR EACH STATEMENT EXECUTE FUNCTION {name}()
"""

_REMOVE = "DELETE FROM {table} WHERE thread_id = %(thread)s AND page_id = ANY(%(ids)s)"

# Bound to a store (`for_store`), a passage is written only while its page record exists (the foreign
# key would refuse it otherwise: a record deleted since it was read).
_INSERT = """
INSERT INTO {table} (thread_id, page_id, position, body)
SELECT %(thread)s, r.page_id, r.position, r.body
  FROM unnest(%(pages)s::text[], %(positions)s::int[], %(bodies)s::text[]) AS r(page_id, position, body)
 {where}
ON CONFLICT (thread_id, page_id, position) DO NOTHING
"""

# A thread is known once loaded or once its first page is added (a thread whose earlier pages the
# index never saw waits for the cold load of its first search); `through` only rises here. Returns
# the thread's `through` after the write (no row: unknown, nothing is indexed).
_RAISE_THROUGH = """
INSERT INTO {threads} AS t (thread_id, through)
SELECT %(thread)s, %(through)s
 WHERE %(first)s OR EXISTS (SELECT 1 FROM {threads} WHERE thread_id = %(thread)s)
ON CONFLICT (thread_id) DO UPDATE SET through = greatest(t.through, excluded.through)
RETURNING t.through
"""

# A table made by an older version holds passages and no threads: each holds what its pages do.
_BACKFILL_THREADS = """
INSERT INTO {threads} (thread_id, through)
SELECT thread_id, max(substr(page_id, 2)::integer) FROM {table} GROUP BY thread_id
"""

# A table made by an older version holds passages and no frequencies: counted once, at setup.
_BACKFILL = """
INSERT INTO {terms} (thread_id, lexeme, docs)
SELECT thread_id, lexeme, count(*) FROM {table}, unnest(tsvector_to_array(tsv)) AS lexeme GROUP BY 1, 2
UNION ALL SELECT thread_id, '', count(*) FROM {table} GROUP BY 1
"""


def _passages(pages: Iterable[Page]) -> tuple[list[str], dict[str, list[Any]]]:
    """The pages' ids and their passages as columns (one array per column: one statement adds all)."""
    ids: list[str] = []
    columns: dict[str, list[Any]] = {"pages": [], "positions": [], "bodies": []}
    for page in pages:
        ids.append(page.id)
        for position, message in enumerate(page.messages):
            columns["pages"].append(page.id)
            columns["positions"].append(position)
            columns["bodies"].append(escape_text(message_text(message)[:MAX_PASSAGE_CHARS]))
    return ids, columns


class PostgresSearchIndex(SearchIndex):
    """Per-thread passage search in a PostgreSQL table, shared by every process using the database.

    Args:
        conn: A connection URI (a small `psycopg_pool.ConnectionPool` is opened on first use), a
            psycopg `Connection` (in autocommit mode, as LangGraph's stores use) or `ConnectionPool`,
            or an `AsyncConnection` / `AsyncConnectionPool` (then only the async methods work).
        table: Name of the passage table (its frequencies live in ``<table>_terms``).
        config: The text search configuration (``english`` stems English words and drops stopwords;
            ``simple`` only lower-cases).
        setup: Create the tables and the index on first use if missing.

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

    def __init__(
        self,
        conn: Any,
        *,
        table: str = "langmem_paging_passages",
        config: str = "english",
        setup: bool = True,
    ) -> None:
        for name, value in (("table", table), ("config", config)):
            if not isinstance(value, str) or not _NAME.match(value):
                raise ValueError(
                    f"`{name}` must be a lower-case SQL name (letters, digits, _; at most 56); got {value!r}."
                )
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
        self.terms = f"{table}_terms"
        self.threads = f"{table}_threads"
        self.function = f"{table}_search"
        self._setup_pending = setup
        self._follows_store = False  # `for_store`: passages tied to the store's page records
        self._only_stored = ""
        self._loop: asyncio.AbstractEventLoop | None = None  # an async store's loop, for the sync methods
        self._guard = threading.Lock()
        self._conn_lock = threading.Lock()  # one transaction at a time on a single connection you passed
        self._aconn_lock: asyncio.Lock | None = None
        self._owned_pool: Any = None
        # thread -> `through` as last read or written by this object; another process's write is
        # seen by the next search or add here, which reads it back (`_remember`)
        self._through: LRU[str, int] = LRU(THROUGH_CACHE)

    # -- connections ------------------------------------------------------------------
    @classmethod
    def for_store(cls, store: Any) -> PostgresSearchIndex | None:
        """The index in a LangGraph `PostgresStore`'s or `AsyncPostgresStore`'s own database, on the
        store's own connection or pool (and its lock, for a single connection): nothing to open or close
        beside the store. Its passages are tied to the store's page records (a foreign key with ``ON
        DELETE CASCADE``, `store_tables`), so a record deleted by anyone takes them along. On an async
        store the async methods await its connection natively and the sync ones run there, on the
        store's loop, as the store's own sync methods do. None for any other store."""
        kind = store_class(store)
        if kind not in ("postgres", "async-postgres") or not hasattr(store, "conn"):
            return None
        index = cls(store.conn)
        index._follows_store = True
        index._only_stored = (
            f"WHERE EXISTS (SELECT 1 FROM {STORE_TABLE} s WHERE s.prefix = {pages_prefix_sql('%(thread)s', placeholders=True)} "
            "AND s.key = r.page_id)"
        )
        single = not hasattr(store.conn, "getconn")
        if kind == "async-postgres":
            index._loop = store.loop
            if single:
                index._aconn_lock = store.lock
        elif single:
            index._conn_lock = store.lock
        return index

    def _setup(self) -> Work[None]:
        t, terms = self.table, self.terms
        yield _Statement(
            f"SELECT pg_advisory_xact_lock(hashtext('{t}'))"
        )  # several workers may set up at once
        yield _Statement(f"""CREATE TABLE IF NOT EXISTS {t} (
                    thread_id text NOT NULL,
                    page_id text NOT NULL,
                    position integer NOT NULL,
                    body text NOT NULL,
                    tsv tsvector GENERATED ALWAYS AS (to_tsvector('{self.config}'::regconfig, body)) STORED,
                    PRIMARY KEY (thread_id, page_id, position))""")
        # the page record's key in the store (`store_tables`): what the foreign key of `for_store` uses
        yield _Statement(
            f"ALTER TABLE {t} ADD COLUMN IF NOT EXISTS prefix text "
            f"GENERATED ALWAYS AS ({pages_prefix_sql('thread_id')}) STORED"
        )
        # No pending list: GIN's fast update defers new entries to a list every search reads in full
        # until a vacuum merges it (12 ms for a 10-row match after 1k pages were added).
        yield _Statement(f"CREATE INDEX IF NOT EXISTS {t}_tsv ON {t} USING gin (tsv) WITH (fastupdate = off)")
        rows = yield _Statement(
            "SELECT coalesce('fastupdate=off' = ANY(reloptions), false) FROM pg_class "
            "WHERE oid = %s::regclass",
            (f"{t}_tsv",),
            fetch=True,
        )
        if not _first(rows[0]):  # an index an older version made (altered once: it needs its owner's rights)
            yield _Statement(f"ALTER INDEX {t}_tsv SET (fastupdate = off)")
            yield _Statement("SELECT gin_clean_pending_list(%s::regclass)", (f"{t}_tsv",))
        rows = yield _Statement("SELECT to_regclass(%s) IS NULL AS missing", (terms,), fetch=True)
        if _first(rows[0]):
            yield _Statement(f"""CREATE TABLE {terms} (
                    thread_id text NOT NULL,
                    lexeme text NOT NULL,
                    docs integer NOT NULL,
                    PRIMARY KEY (thread_id, lexeme))""")
            yield _Statement(_BACKFILL.format(table=t, terms=terms))
        rows = yield _Statement("SELECT to_regclass(%s) IS NULL AS missing", (self.threads,), fetch=True)
        if _first(rows[0]):
            yield _Statement(f"""CREATE TABLE {self.threads} (
                    thread_id text PRIMARY KEY,
                    through integer NOT NULL)""")
            yield _Statement(_BACKFILL_THREADS.format(table=t, threads=self.threads))
        yield from self._setup_triggers()
        if self._follows_store:
            yield from self._setup_foreign_key()
        if not (yield from self._set_up()):  # the function last: its mark says the rest is made
            marked = self._definition().replace("$body$\n", f"$body$\n{self._mark()}\n", 1)
            yield _Statement(marked)

    def _definition(self) -> str:
        return _SEARCH_FUNCTION.format(
            function=self.function, table=self.table, terms=self.terms, config=f"'{self.config}'::regconfig"
        )

    def _mark(self) -> str:
        """The comment in the search function saying this version's setup is done (with the foreign
        key, for an index that follows a store): a worker's first call reads it, one statement,
        and skips the setup."""
        made = (self._definition(), _COUNT_ADDED, _COUNT_REMOVED, _TRIGGER, pages_prefix_sql("thread_id"))
        version = hashlib.blake2b("".join(made).encode(), digest_size=8).hexdigest()
        return f"-- setup {version}" + (" follows store" if self._follows_store else "")

    def _set_up(self) -> Work[bool]:
        """Whether this version's setup is done: its tables exist and the search function has its mark."""
        rows = yield _Statement(
            "SELECT (SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure(%s)) AS src, "
            "to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL "
            "AS tables",
            (
                f"{self.function}(text,text,integer,integer,double precision)",
                self.table,
                self.terms,
                self.threads,
            ),
            fetch=True,
        )
        source, tables = _values(rows[0])
        return bool(tables) and source is not None and self._mark() in source

    def _setup_triggers(self) -> Work[None]:
        """The triggers that keep the thread's frequencies with its passages (made once)."""
        t = self.table
        for suffix, body, event, rows, alias in (
            ("_ins", _COUNT_ADDED, "INSERT", "NEW", "new_rows"),
            ("_del", _COUNT_REMOVED, "DELETE", "OLD", "old_rows"),
        ):
            name = f"{t}{suffix}"
            yield _Statement(body.format(function=name, terms=self.terms))
            rows_found = yield _Statement(
                "SELECT count(*) FROM pg_trigger WHERE tgrelid = %s::regclass AND tgname = %s",
                (t, name),
                fetch=True,
            )
            if not _first(rows_found[0]):
                yield _Statement(_TRIGGER.format(name=name, event=event, table=t, rows=rows, alias=alias))

    def _setup_foreign_key(self) -> Work[None]:
        """Tie each passage to its page record in the store's table, so a record deleted by anyone (the
        store's API, the server deleting a thread, the TTL sweep) takes its passages, and by the
        triggers their frequencies, along (`store_tables`). A table made before (by hand, from a URI)
        loses the passages of records that are gone first."""
        t = self.table
        query, params = postgres_store_check()
        rows = yield _Statement(query, params, fetch=True)
        check_postgres_store(_first(rows[0]) if rows else None)
        yield _Statement(f"CREATE INDEX IF NOT EXISTS {t}_key ON {t} (prefix, page_id)")
        rows = yield _Statement(
            "SELECT count(*) FROM pg_constraint WHERE conrelid = %s::regclass AND conname = %s",
            (t, f"{t}_fk"),
            fetch=True,
        )
        if not _first(rows[0]):
            yield _Statement(
                f"DELETE FROM {t} p WHERE NOT EXISTS (SELECT 1 FROM {STORE_TABLE} s "
                "WHERE s.prefix = p.prefix AND s.key = p.page_id)"
            )
            yield _Statement(
                f"ALTER TABLE {t} ADD CONSTRAINT {t}_fk FOREIGN KEY (prefix, page_id) "
                f"REFERENCES {STORE_TABLE} (prefix, key) ON DELETE CASCADE"
            )

    @contextmanager
    def _connection(self, *, write: bool = True) -> Iterator[Any]:
        """A sync connection; inside a transaction for a write (committed on exit, rolled back on an
        error). A read is one statement: on an autocommit connection it needs no BEGIN/COMMIT."""
        if self._async is not None:
            raise TypeError(
                "This PostgresSearchIndex was given an async connection: use the async methods "
                "(`aadd`, `asearch`, ...), or pass a sync connection, pool or URI."
            )
        with self._guard:
            if self._sync is None:
                from psycopg_pool import ConnectionPool

                self._owned_pool = ConnectionPool(
                    self._uri or "", min_size=1, max_size=4, kwargs={"autocommit": True}, open=True
                )
                self._sync = self._owned_pool
        source = self._sync
        holder = source.connection() if hasattr(source, "getconn") else _borrowed(source, self._conn_lock)
        with holder as conn:
            if self._setup_pending:
                if not drive(self._set_up(), lambda statement: _execute(conn, statement)):
                    with conn.transaction():
                        drive(self._setup(), lambda statement: _execute(conn, statement))
                self._setup_pending = False
            if write or not conn.autocommit:
                with conn.transaction():
                    yield conn
            else:
                yield conn

    @asynccontextmanager
    async def _aconnection(self, *, write: bool = True) -> AsyncIterator[Any]:
        source = self._async
        if self._aconn_lock is None:
            self._aconn_lock = asyncio.Lock()
        holder = source.connection() if hasattr(source, "getconn") else _aborrowed(source, self._aconn_lock)
        async with holder as conn:
            if self._setup_pending:
                if not await adrive(self._set_up(), lambda statement: _aexecute(conn, statement)):
                    async with conn.transaction():
                        await adrive(self._setup(), lambda statement: _aexecute(conn, statement))
                self._setup_pending = False
            if write or not conn.autocommit:
                async with conn.transaction():
                    yield conn
            else:
                yield conn

    def close(self) -> None:
        """Close the pool this index opened for a URI (a connection or pool you passed stays open)."""
        if self._owned_pool is not None:
            self._owned_pool.close()
            self._owned_pool = self._sync = None

    # -- one transaction, sync or async ------------------------------------------------------
    # The statements note the thread's `through` as they read or write it; a transaction that fails
    # (its commit included) leaves nothing noted: the next call reads the database.
    def _transact(self, work: Work[T], thread_id: str, *, write: bool = True) -> T:
        if self._async is not None and self._loop is not None:  # an async store's index, called sync
            return _on_loop(self._atransact(work, thread_id, write=write), self._loop)
        try:
            with self._connection(write=write) as conn:
                return drive(work, lambda statement: _execute(conn, statement))
        except BaseException:
            self._remember(thread_id, None)
            raise

    async def _atransact(self, work: Work[T], thread_id: str, *, write: bool = True) -> T:
        if self._async is None:  # a sync connection: `_transact` in a worker thread
            return await asyncio.to_thread(self._transact, work, thread_id, write=write)
        try:
            async with self._aconnection(write=write) as conn:
                return await adrive(work, lambda statement: _aexecute(conn, statement))
        except BaseException:
            self._remember(thread_id, None)
            raise

    # -- SearchIndex ------------------------------------------------------------------------
    def has(self, thread_id: str) -> bool:
        """True once the thread was loaded or its first page added (else a search loads it)."""
        return self.indexed_through(thread_id) is not None

    async def ahas(self, thread_id: str) -> bool:
        """Async `has`."""
        return await self.aindexed_through(thread_id) is not None

    def indexed_through(self, thread_id: str) -> int | None:
        """The highest page number up to which every stored page of the thread is indexed (None:
        a thread the index never held). Answered from what this object last read or wrote for the
        thread when it can: another process's write shows at the latest after the next search."""
        if (through := self._through.get(thread_id)) is not None:
            return through
        return self._transact(self._read_through(thread_id), thread_id, write=False)

    async def aindexed_through(self, thread_id: str) -> int | None:
        """Async `indexed_through`."""
        if (through := self._through.get(thread_id)) is not None:
            return through
        return await self._atransact(self._read_through(thread_id), thread_id, write=False)

    def load(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Replace a thread's passages with those of `pages` (e.g. to index pages stored before this
        index was in use)."""
        self._transact(self._load(thread_id, list(pages)), thread_id)

    async def aload(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Async `load`."""
        await self._atransact(self._load(thread_id, list(pages)), thread_id)

    def add(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Index new pages of a thread and raise its `indexed_through` to the highest of them (the
        caller gives every stored page above the old one); a page indexed before has its passages
        replaced. A thread the index does not hold starts with its first page (``p1``); else its
        pages were stored before, and its first search loads them all."""
        self._transact(self._add(thread_id, list(pages)), thread_id)

    async def aadd(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Async `add`."""
        await self._atransact(self._add(thread_id, list(pages)), thread_id)

    def on(self, conn: Any) -> bool:
        """Whether this index writes on `conn` (a store's connection or pool it shares)."""
        return conn is not None and (conn is self._sync or conn is self._async)

    def add_on(self, cursor: Any, thread_id: str, pages: Sequence[Page]) -> None:
        """`add`'s statements on a cursor of the caller's transaction on this index's connection (a
        `PostgresStore`'s: a step's passages written with its records, `NumberClaims.joins`). When that
        transaction fails, the caller says so (`rolled_back`)."""
        drive(self._joined_add(thread_id, list(pages)), lambda statement: _execute(cursor, statement))

    async def aadd_on(self, cursor: Any, thread_id: str, pages: Sequence[Page]) -> None:
        """`add_on` on an async cursor."""
        await adrive(self._joined_add(thread_id, list(pages)), lambda statement: _aexecute(cursor, statement))

    def rolled_back(self, thread_id: str) -> None:
        """A caller's transaction that ran `add_on` failed: what this object noted of the thread is
        forgotten (the next call reads the database)."""
        self._remember(thread_id, None)

    def update(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Replace the passages of pages whose content changed (a message forgotten); what the
        index holds of the thread is unchanged."""
        self._transact(self._replace(thread_id, list(pages)), thread_id)

    async def aupdate(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Async `update`."""
        await self._atransact(self._replace(thread_id, list(pages)), thread_id)

    def drop(self, thread_id: str) -> None:
        """Delete a thread's passages and frequencies."""
        self._transact(self._drop(thread_id), thread_id)

    async def adrop(self, thread_id: str) -> None:
        """Async `drop`."""
        await self._atransact(self._drop(thread_id), thread_id)

    def search(self, thread_id: str, query: str, *, limit: int, allow: Callable[[str], bool]) -> list[Hit]:
        """The best `limit` passages of pages `allow` accepts, best first."""
        return self._transact(self._search(thread_id, query, limit, allow), thread_id, write=False)

    async def asearch(
        self, thread_id: str, query: str, *, limit: int, allow: Callable[[str], bool]
    ) -> list[Hit]:
        """Async `search`."""
        return await self._atransact(self._search(thread_id, query, limit, allow), thread_id, write=False)

    def document_frequencies(self, thread_id: str, words: Sequence[str]) -> dict[str, int]:
        """How many of the thread's passages hold each of `words` (by lexeme, as `config` stems
        them; absent: none). For operators and tests: what decides which query words are common."""
        return self._transact(self._frequencies(thread_id, list(words)), thread_id, write=False)

    # -- the statements, written once ---------------------------------------------------------
    def _lock(self, thread_id: str) -> _Statement:
        """Writes to one thread queue (two workers adding the same page, a forget racing a step)."""
        return _Statement("SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))", (self.table, thread_id))

    def _load(self, thread_id: str, pages: list[Page]) -> Work[None]:
        yield from self._drop(thread_id)
        through = max((page_number(page.id) for page in pages), default=0)
        yield _Statement(
            f"INSERT INTO {self.threads} (thread_id, through) VALUES (%s, %s)", (thread_id, through)
        )
        yield from self._insert(thread_id, pages)
        self._remember(thread_id, through)

    def _add(self, thread_id: str, pages: list[Page]) -> Work[None]:
        if not pages:
            return
        yield self._lock(thread_id)
        numbers = [page_number(page.id) for page in pages]
        rows = yield _Statement(
            _RAISE_THROUGH.format(threads=self.threads),
            fetch=True,
            prepare=True,
            params={"thread": thread_id, "through": max(numbers), "first": 1 in numbers},
        )
        self._remember(thread_id, _first(rows[0]) if rows else None)
        if rows:  # else unknown: its first search loads every stored page
            yield from self._replace(thread_id, pages, locked=True)

    def _joined_add(self, thread_id: str, pages: list[Page]) -> Work[None]:
        """`_add` in a transaction of the caller's; the setup first if this object has not checked it
        (kept pending: a rolled-back setup is made again by the next call)."""
        if self._setup_pending and not (yield from self._set_up()):
            yield from self._setup()
        yield from self._add(thread_id, pages)

    def _replace(self, thread_id: str, pages: list[Page], *, locked: bool = False) -> Work[None]:
        if not pages:
            return
        if not locked:
            yield self._lock(thread_id)
        ids = [page.id for page in pages]
        yield _Statement(
            _REMOVE.format(table=self.table),
            {"thread": thread_id, "ids": ids},
            prepare=True,
        )
        yield from self._insert(thread_id, pages)

    def _insert(self, thread_id: str, pages: list[Page]) -> Work[None]:
        _, columns = _passages(pages)
        if columns["pages"]:
            yield _Statement(
                _INSERT.format(table=self.table, where=self._only_stored),
                {"thread": thread_id, **columns},
                prepare=True,
            )

    def _drop(self, thread_id: str) -> Work[None]:
        yield self._lock(thread_id)
        yield _Statement(f"DELETE FROM {self.table} WHERE thread_id = %s", (thread_id,))
        yield _Statement(f"DELETE FROM {self.terms} WHERE thread_id = %s", (thread_id,))
        yield _Statement(f"DELETE FROM {self.threads} WHERE thread_id = %s", (thread_id,))
        self._remember(thread_id, None)

    def _read_through(self, thread_id: str) -> Work[int | None]:
        rows = yield _Statement(
            f"SELECT through FROM {self.threads} WHERE thread_id = %s", (thread_id,), fetch=True, prepare=True
        )
        through = int(_first(rows[0])) if rows else None
        self._remember(thread_id, through)
        return through

    def _search(
        self, thread_id: str, query: str, limit: int, allow: Callable[[str], bool]
    ) -> Work[list[Hit]]:
        if limit <= 0 or not isinstance(query, str) or not query.strip():
            return []
        fetch = limit * 4
        # the thread's `through` comes back in the same round trip (a row without a page), so the
        # cache `indexed_through` answers from is never staler than this process's last search
        sql = (
            f"SELECT NULL AS page_id, through AS position, NULL AS score FROM {self.threads} "
            f"WHERE thread_id = %s UNION ALL "
            f"(SELECT page_id, position, score FROM {self.function}(%s, %s, %s, %s, %s))"
        )
        while True:
            args = (
                thread_id,
                thread_id,
                escape_text(query[:MAX_QUERY_CHARS]),
                fetch,
                COMMON_MIN,
                COMMON_SHARE,
            )
            rows = yield _Statement(sql, args, fetch=True, prepare=True)
            heads = [row for row in rows if _first(row) is None]
            self._remember(thread_id, int(_values(heads[0])[1]) if heads else None)
            rows = [row for row in rows if _first(row) is not None]
            hits = self._hits(rows, allow)
            if len(hits) >= limit or len(rows) < fetch:
                return hits[:limit]
            fetch *= 4  # the best passages belong to pages the caller may not see: look further

    def _frequencies(self, thread_id: str, words: list[str]) -> Work[dict[str, int]]:
        rows = yield _Statement(
            f"SELECT f.lexeme, f.docs FROM {self.terms} f WHERE f.thread_id = %s AND f.lexeme = ANY("
            f"SELECT unnest(tsvector_to_array(to_tsvector('{self.config}'::regconfig, %s))))",
            (thread_id, escape_text(" ".join(words))),
            fetch=True,
        )
        return {str(v[0]): int(v[1]) for v in map(_values, rows)}

    # -- helpers ----------------------------------------------------------------------------
    def _remember(self, thread_id: str, through: int | None) -> None:
        if through is None:
            self._through.pop(thread_id)
        else:
            self._through.put(thread_id, int(through))

    @staticmethod
    def _hits(rows: list[Any], allow: Callable[[str], bool]) -> list[Hit]:
        hits = []
        for row in rows:
            page_id, position, score = (
                (row["page_id"], row["position"], row["score"]) if isinstance(row, dict) else row
            )
            page_number(page_id)  # only well-formed ids are ever written; a bad row is a corrupt table
            if allow(page_id):
                hits.append(Hit(page_id, int(position), float(score)))
        return hits


@dataclass(frozen=True)
class _Statement:
    """One SQL statement of an operation."""

    sql: str
    """The statement (`%s` or `%(name)s` placeholders)."""
    params: Any = None
    """Its parameters."""
    fetch: bool = False
    """Return its rows."""
    prepare: bool = False
    """Prepare it on the connection at once (the hot statements: parsed and planned once per
    connection, not on every call)."""


Work = Generator[_Statement, Any, T]
"""An index operation written once: the statements of one transaction, run sync or async."""


def _execute(conn: Any, statement: _Statement) -> Any:
    cursor = conn.execute(statement.sql, statement.params, prepare=statement.prepare or None)
    return cursor.fetchall() if statement.fetch else None


async def _aexecute(conn: Any, statement: _Statement) -> Any:
    cursor = await conn.execute(statement.sql, statement.params, prepare=statement.prepare or None)
    return await cursor.fetchall() if statement.fetch else None


def _first(row: Any) -> Any:
    """The first column of a row, whatever the connection's row factory (tuples, or LangGraph's dicts)."""
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


def _values(row: Any) -> list[Any]:
    return list(row.values()) if isinstance(row, dict) else list(row)


def _on_loop(coroutine: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> T:
    """Run `coroutine` on `loop` from another thread, as `AsyncPostgresStore`'s sync methods do; on the
    loop's own thread that would wait forever: refused."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coroutine.close()
        raise asyncio.InvalidStateError(
            "A sync method of the search index of an AsyncPostgresStore was called on the store's own event "
            "loop, where it would wait for itself: call the async method (`asearch`, `aadd`, ...)."
        )
    return asyncio.run_coroutine_threadsafe(coroutine, loop).result()


@contextmanager
def _borrowed(conn: T, lock: threading.Lock) -> Iterator[T]:
    """A connection the caller owns (not closed on exit), one transaction at a time."""
    with lock:
        yield conn


@asynccontextmanager
async def _aborrowed(conn: T, lock: asyncio.Lock) -> AsyncIterator[T]:
    async with lock:
        yield conn
