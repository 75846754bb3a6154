"""Passage search persisted beside a SQLite page store (SQLite FTS5): no cold start.

`InMemoryBM25Index` is rebuilt from the store the first time a process searches a thread, which
costs seconds to minutes on long threads after every restart. This index keeps the passages in
an FTS5 table of the store's own database file, so every process finds them indexed: a fresh
process's first search costs what a warm one does. Messages are indexed as the library's stemmed
terms (`search_terms`), so it matches and ranks as the in-process index does: BM25 with the
thread's own statistics (kept in the file beside the FTS5 table), whatever else the file holds.

It is the default index of a file-backed `SqliteStore` (`langmem_paging.index.defaults.default_index`);
for any other SQLite file pass it yourself: ``PagingMiddleware(index=SqliteSearchIndex(path))``.

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> index = SqliteSearchIndex(":memory:")
    >>> page = Page(id="p1", messages=[HumanMessage("We adopted a greyhound.", id="a"),
    ...                                AIMessage("Pottery on Tuesday.", id="b")],
    ...             bookmark="[p1:x]", keywords=[], token_count=9, boundary="fixed_2", created_turn=1)
    >>> index.load("t", [page])
    >>> [(h.page_id, h.index) for h in index.search("t", "greyhounds", limit=3, allow=lambda p: True)]
    [('p1', 0)]
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import os
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langmem_paging.core.records import Page, page_number
from langmem_paging.core.text import search_terms
from langmem_paging.core.tokens import message_text
from langmem_paging.index.base import Hit, SearchIndex, bm25_scores
from langmem_paging.index.store_classes import ensure_setup
from langmem_paging.index.store_tables import (
    STORE_TABLE,
    check_sqlite_store,
    sqlite_is_pages_prefix_sql,
    sqlite_thread_of_prefix_sql,
)

__all__ = ["SqliteSearchIndex", "sqlite_file_of"]

_DDL = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS langmem_paging_fts USING fts5("
    "body, thread_id UNINDEXED, page_id UNINDEXED, position UNINDEXED, tokenize='unicode61')",
    "CREATE TABLE IF NOT EXISTS langmem_paging_fts_pages (thread_id TEXT NOT NULL, page_id TEXT NOT NULL, "
    "PRIMARY KEY (thread_id, page_id))",
    "CREATE TABLE IF NOT EXISTS langmem_paging_fts_threads (thread_id TEXT PRIMARY KEY, "
    "docs INTEGER NOT NULL DEFAULT 0, length INTEGER NOT NULL DEFAULT 0)",
    # scratch rows of `_FOLLOW_STORE` (empty between statements)
    "CREATE TABLE IF NOT EXISTS langmem_paging_fts_gone (fts_rowid INTEGER PRIMARY KEY, thread_id TEXT, body TEXT)",
]
_DF = (
    "CREATE TABLE IF NOT EXISTS langmem_paging_fts_df (thread_id TEXT NOT NULL, term TEXT NOT NULL, "
    "docs INTEGER NOT NULL, PRIMARY KEY (thread_id, term)) WITHOUT ROWID"
)
# The rows of a page whose store record was deleted (by anyone): its messages (one scan of the FTS5
# table, as `_delete_page`), their term counts, the thread's totals, then the rows themselves. A message's
# body is its terms joined by spaces (no quote or backslash in a term: read as a JSON array).
_TERMS_OF = (
    "json_each(CASE WHEN g.body = '' THEN '[]' ELSE '[\"' || replace(g.body, ' ', '\",\"') || '\"]' END)"
)
_GONE = "langmem_paging_fts_gone"
_FOLLOW_STORE = f"""
CREATE TRIGGER IF NOT EXISTS langmem_paging_fts_follow AFTER DELETE ON {STORE_TABLE}
WHEN {sqlite_is_pages_prefix_sql("old.prefix")}
BEGIN
    INSERT INTO {_GONE} (fts_rowid, thread_id, body)
    SELECT rowid, thread_id, body FROM langmem_paging_fts
     WHERE thread_id = {sqlite_thread_of_prefix_sql("old.prefix")} AND page_id = old.key;
    UPDATE langmem_paging_fts_df SET docs = docs - (
        SELECT count(DISTINCT g.fts_rowid) FROM {_GONE} g, {_TERMS_OF} t WHERE t.value = langmem_paging_fts_df.term)
     WHERE thread_id = {sqlite_thread_of_prefix_sql("old.prefix")}
       AND term IN (SELECT t.value FROM {_GONE} g, {_TERMS_OF} t);
    DELETE FROM langmem_paging_fts_df
     WHERE thread_id = {sqlite_thread_of_prefix_sql("old.prefix")} AND docs <= 0;
    UPDATE langmem_paging_fts_threads
       SET docs = docs - (SELECT count(*) FROM {_GONE}),
           length = length - (SELECT count(*) FROM {_GONE} g, {_TERMS_OF} t)
     WHERE thread_id = {sqlite_thread_of_prefix_sql("old.prefix")};
    DELETE FROM langmem_paging_fts WHERE rowid IN (SELECT fts_rowid FROM {_GONE});
    DELETE FROM langmem_paging_fts_pages
     WHERE thread_id = {sqlite_thread_of_prefix_sql("old.prefix")} AND page_id = old.key;
    DELETE FROM {_GONE};
END
"""
COMMON_SHARE = 0.02
"""A query term in more than this share of the thread's messages (and more than `COMMON_MIN` of them) is
left out of the match when rarer terms remain: it adds little to BM25 and makes FTS5 visit every
message holding it (seconds at a million messages)."""
COMMON_MIN = 2000
LOAD_CHUNK = 200
"""Pages written per transaction by `load`: the store is read between chunks with no lock held."""
K1, B = 1.2, 0.75
"""BM25 parameters, as `InMemoryBM25Index`'s defaults (one scale for hits and `score`)."""


def sqlite_file_of(store: Any) -> str | None:
    """The database file of a LangGraph `SqliteStore` or `AsyncSqliteStore`; None for an in-memory
    database or another store."""
    conn = getattr(store, "conn", None)
    raw = getattr(conn, "_conn", conn)  # aiosqlite keeps the sqlite3 connection here
    if not isinstance(raw, sqlite3.Connection):
        return None
    try:
        rows = raw.execute("PRAGMA database_list").fetchall()
    except sqlite3.Error:  # another thread owns an aiosqlite connection: no file to share then
        return None
    path = next((row[2] for row in rows if row[1] == "main"), "")
    return path or None


class SqliteSearchIndex(SearchIndex):
    """Per-thread passage search in a SQLite file (FTS5), shared by every process using the file.

    Each thread's statistics are its own (message count, lengths, and in how many of its messages
    each term occurs): which query terms are too common to match on, and BM25's IDF, never depend
    on another thread's pages. The index records the highest page number up to which it holds a
    thread (`indexed_through`), so a page whose index write failed is indexed by a later step or
    search. Deletes overwrite what they free (``PRAGMA secure_delete``) and leave no FTS5 segment
    holding a removed term, so forgotten text is gone from the file's bytes.

    Args:
        path: The database file (the page store's own file is a good home: one file to back up),
            or ``":memory:"`` for a private in-memory database (tests). Its own connection.
        conn: Instead of `path`, an open autocommit connection to share, with the `lock` that
            serializes its users (`for_store` shares a `SqliteStore`'s: the index lives and closes
            with the store, and the file's journal is checkpointed when the store closes).
        analyzer: Text -> terms, as the in-process index (default `search_terms`: stemmed words).
    """

    def __init__(
        self,
        path: str | None = None,
        *,
        conn: sqlite3.Connection | None = None,
        lock: Any = None,
        analyzer: Callable[[str], list[str]] = search_terms,
    ) -> None:
        if path is not None and not isinstance(
            path, (str, os.PathLike)
        ):  # e.g. a connection passed positionally
            raise TypeError(
                f"SqliteSearchIndex(path): `path` is a file path; got {type(path).__name__}. Pass an open "
                "connection as SqliteSearchIndex(conn=conn, lock=lock)."
            )
        if (path is None) == (conn is None):
            raise ValueError("Pass the database `path` or an open `conn` (with its `lock`), not both.")
        self.path, self.analyzer = path, analyzer
        self._conn = (
            conn
            if conn is not None
            else sqlite3.connect(str(path), check_same_thread=False, timeout=30, isolation_level=None)
        )
        self._lock = lock if lock is not None else threading.Lock()
        # FTS5's own secure-delete (SQLite >= 3.42) removes a deleted row's terms from its segments;
        # older versions merge the segments after a delete instead (`_purge`)
        self._fts_secure = sqlite3.sqlite_version_info >= (3, 42, 0)
        with self._lock:
            self._conn.execute(
                "PRAGMA secure_delete = ON"
            )  # freed pages are zeroed: deleted text leaves the file
            for statement in _DDL:
                self._conn.execute(statement)
            if self._fts_secure:
                self._conn.execute(
                    "INSERT INTO langmem_paging_fts (langmem_paging_fts, rank) VALUES ('secure-delete', 1)"
                )
            self._migrate()

    def _migrate(self) -> None:
        """Files written before per-thread frequencies and `indexed_through`: derive them once."""
        if self._migrated():
            return
        with self._transaction():
            if self._migrated():  # another process did it while this one waited
                return
            columns = [row[1] for row in self._conn.execute("PRAGMA table_info(langmem_paging_fts_threads)")]
            if "through" not in columns:
                self._conn.execute(
                    "ALTER TABLE langmem_paging_fts_threads ADD COLUMN through INTEGER NOT NULL DEFAULT 0"
                )
                self._conn.execute(
                    "UPDATE langmem_paging_fts_threads SET through = coalesce((SELECT max(CAST(substr(page_id, 2) "
                    "AS INTEGER)) FROM langmem_paging_fts_pages p WHERE p.thread_id = "
                    "langmem_paging_fts_threads.thread_id), 0)"
                )
            if not self._conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'langmem_paging_fts_df'"
            ).fetchone():
                self._conn.execute(_DF)
                counts: dict[tuple[str, str], int] = {}
                for thread_id, body in self._conn.execute("SELECT thread_id, body FROM langmem_paging_fts"):
                    for term in set(body.split()):
                        counts[thread_id, term] = counts.get((thread_id, term), 0) + 1
                self._conn.executemany(
                    "INSERT INTO langmem_paging_fts_df (thread_id, term, docs) VALUES (?, ?, ?)",
                    [(t, term, n) for (t, term), n in counts.items()],
                )

    def _migrated(self) -> bool:
        columns = [row[1] for row in self._conn.execute("PRAGMA table_info(langmem_paging_fts_threads)")]
        df = self._conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'langmem_paging_fts_df'").fetchone()
        return "through" in columns and df is not None

    @classmethod
    def for_store(cls, store: Any) -> SqliteSearchIndex | None:
        """The index in a LangGraph `SqliteStore`'s file, on the store's own connection and lock (or,
        for an `AsyncSqliteStore`, a connection of its own to the file); None for an in-memory
        database or another store. Its rows follow the store's page records: a trigger on the store's
        table (`store_tables`) removes a page's rows when anyone deletes its record (the store's API,
        the TTL sweep)."""
        conn = getattr(store, "conn", None)
        if isinstance(conn, sqlite3.Connection) and isinstance(
            getattr(store, "lock", None), type(threading.Lock())
        ):
            index = cls(conn=conn, lock=store.lock) if sqlite_file_of(store) else None
        else:
            path = sqlite_file_of(store)
            index = cls(path) if path else None
        if index is not None:
            ensure_setup(store)
            index._follow_store()
        return index

    def _follow_store(self) -> None:
        """The trigger that takes a page's rows along when its store record is deleted (made once)."""
        with self._lock:
            check_sqlite_store(self._conn)
            self._conn.execute(_FOLLOW_STORE)

    def has(self, thread_id: str) -> bool:
        return self.indexed_through(thread_id) is not None

    def indexed_through(self, thread_id: str) -> int | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT through FROM langmem_paging_fts_threads WHERE thread_id = ?", (thread_id,)
            ).fetchone()
        return None if row is None else int(row[0])

    def load(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Index a thread from scratch (once: pages stored before this index existed).

        `pages` may be a lazy store read (`PageStore.scan`), whose reads take the store's lock, the
        one this index shares: it is read in chunks with no lock held, each chunk written in its own
        transaction (a load cut short leaves `indexed_through` at its last chunk: the rest is a gap
        the next step or search fills)."""
        chunks = _chunked(pages, LOAD_CHUNK)
        first = next(chunks, [])
        with self._lock, self._transaction():
            self._delete(thread_id)
            self._conn.execute("INSERT INTO langmem_paging_fts_threads (thread_id) VALUES (?)", (thread_id,))
            self._insert(thread_id, first)
        for chunk in chunks:
            with self._lock, self._transaction():
                self._insert(thread_id, chunk)

    def add(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Index a thread's new pages. A thread starts here with its first page (``p1``); one the
        index never saw start (its pages were stored before) is loaded by its first search."""
        pages = list(pages)
        with self._lock, self._transaction():
            self.add_in_transaction(thread_id, pages)

    def add_in_transaction(self, thread_id: str, pages: Sequence[Page]) -> None:
        """`add`'s statements in the caller's transaction on this index's connection, the caller
        holding its lock: a step's passages written with its records, on a `SqliteStore`'s own
        connection (`NumberClaims.joins`)."""
        known = self._conn.execute(
            "SELECT 1 FROM langmem_paging_fts_threads WHERE thread_id = ?", (thread_id,)
        ).fetchone()
        if known is None and any(page.id == "p1" for page in pages):
            self._conn.execute("INSERT INTO langmem_paging_fts_threads (thread_id) VALUES (?)", (thread_id,))
            known = (1,)
        if known is not None:
            self._insert(thread_id, pages)

    def on(self, conn: Any) -> bool:
        """Whether this index writes on `conn` (a store's connection it shares)."""
        return self._conn is conn

    def update(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Index pages whose content changed (a message forgotten) again; the removed terms are
        purged from the file."""
        pages = list(pages)
        with self._lock:
            with self._transaction():
                for page in pages:
                    self._delete_page(thread_id, page.id)
                self._insert(thread_id, pages)
            self._purge()

    def drop(self, thread_id: str) -> None:
        with self._lock:
            with self._transaction():
                self._delete(thread_id)
            self._purge()

    def search(self, thread_id: str, query: str, *, limit: int, allow: Callable[[str], bool]) -> list[Hit]:
        """FTS5 finds the thread's messages holding a selective query term; they are ranked by BM25
        with the thread's own statistics (FTS5's `bm25()` counts every thread of the file).

        When every query term is common in the thread, only the rarest is matched and FTS5 ranks
        its messages first (`take` at a time): ranking all of them here took 316 ms at 30k messages
        (FTS5 alone: 137 ms; pre-ranked: 129 ms). One term's order differs from the thread's own
        only by the file-wide mean message length FTS5 normalizes with."""
        terms = list(dict.fromkeys(self.analyzer(query)))
        if not terms:
            return []
        with self._lock:
            docs, length, df = self._stats(thread_id, terms)
        if not docs:
            return []
        selected = _selective(terms, df, docs)
        common = df.get(selected[0], 0) > _common_limit(docs)
        idf = {t: _idf(docs, df.get(t, 0)) for t in terms}
        mean = length / docs or 1.0
        take = 4 * limit if common else 0
        while True:
            rows = self._matching(
                thread_id, " OR ".join('"' + t.replace('"', '""') + '"' for t in selected), take
            )
            scored = []
            for page_id, position, body in rows:
                if allow(page_id):
                    scored.append(
                        (-_bm25(body.split(), terms, idf, mean), page_number(page_id), int(position), page_id)
                    )
            if not take or len(scored) >= limit or len(rows) < take:
                break
            take *= 4
        best = heapq.nsmallest(limit, scored)
        return [Hit(page_id, position, -score) for score, _, position, page_id in best]

    def _matching(self, thread_id: str, match: str, take: int) -> list[tuple[str, int, str]]:
        """The thread's messages matching (all of them; or FTS5's best `take`)."""
        sql = (
            "SELECT page_id, position, body FROM langmem_paging_fts WHERE langmem_paging_fts MATCH ? "
            "AND thread_id = ?"
        )
        with self._lock:
            if not take:
                return self._conn.execute(sql, (match, thread_id)).fetchall()
            return self._conn.execute(
                sql + " ORDER BY bm25(langmem_paging_fts) LIMIT ?", (match, thread_id, take)
            ).fetchall()

    def _stats(self, thread_id: str, terms: list[str]) -> tuple[int, int, dict[str, int]]:
        """The thread's message count, total length and the document frequencies of `terms` (hold the lock)."""
        row = self._conn.execute(
            "SELECT docs, length FROM langmem_paging_fts_threads WHERE thread_id = ?", (thread_id,)
        ).fetchone()
        if not row or not row[0]:
            return 0, 0, {}
        placeholders = ",".join("?" * len(terms))
        df = dict(
            self._conn.execute(
                f"SELECT term, docs FROM langmem_paging_fts_df WHERE thread_id = ? AND term IN ({placeholders})",  # noqa: S608
                [thread_id, *terms],
            ).fetchall()
        )
        return int(row[0]), int(row[1]), df

    def score(self, thread_id: str, query: str, texts: Sequence[str]) -> list[float]:
        """BM25 of `texts` with the thread's document frequencies and lengths (on its hits' scale)."""
        terms = list(dict.fromkeys(self.analyzer(query)))
        with self._lock:
            docs, length, df = self._stats(thread_id, terms) if terms else (0, 0, {})
        if not docs:
            return bm25_scores(query, texts, analyzer=self.analyzer)
        return bm25_scores(
            query,
            texts,
            analyzer=self.analyzer,
            k1=K1,
            b=B,
            df=lambda t: df.get(t, 0),
            n_docs=docs,
            mean_length=length / docs,
        )

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction (taken at once: two processes on one file queue, never deadlock)."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _purge(self) -> None:
        """Leave no FTS5 segment holding a deleted row's terms (hold the lock). With FTS5's
        secure-delete they were removed with the row; else the segments are merged into one, a
        cost paid by forget and delete only (linear in the file's index, never on a turn)."""
        if not self._fts_secure:
            self._conn.execute("INSERT INTO langmem_paging_fts (langmem_paging_fts) VALUES ('optimize')")

    # -- rows ---------------------------------------------------------------------------
    def _insert(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Index pages not indexed yet (keyed by page id: a re-run writes nothing twice) and raise
        the thread's `through` to the highest page given (the caller gives every page below it).
        Five statements however many pages and terms: one per page and one per term took 1.05-1.10 ms
        per paging turn's passages at a 4000-token budget, these 0.93 (the statements alone)."""
        given: dict[str, Page] = {}
        for page in pages:
            given.setdefault(page.id, page)
        known = {
            page_id
            for (page_id,) in self._conn.execute(
                "SELECT page_id FROM langmem_paging_fts_pages WHERE thread_id = ? AND page_id IN "
                "(SELECT value FROM json_each(?))",
                (thread_id, json.dumps(list(given))),
            )
        }
        new = [page for page in given.values() if page.id not in known]
        rows, length, df = [], 0, Counter[str]()
        for page in new:
            for position, message in enumerate(page.messages):
                terms = self.analyzer(message_text(message))
                rows.append((" ".join(terms), thread_id, page.id, position))
                length += len(terms)
                df.update(set(terms))
        self._conn.executemany(
            "INSERT INTO langmem_paging_fts_pages (thread_id, page_id) VALUES (?, ?)",
            [(thread_id, page.id) for page in new],
        )
        self._conn.executemany(
            "INSERT INTO langmem_paging_fts (body, thread_id, page_id, position) VALUES (?, ?, ?, ?)", rows
        )
        # the term counts as one JSON object: 220 upserts one by one took 0.65 ms of CPU, in one 0.27
        self._conn.execute(
            "INSERT INTO langmem_paging_fts_df (thread_id, term, docs) SELECT ?, key, value FROM json_each(?) "
            "WHERE true ON CONFLICT (thread_id, term) DO UPDATE SET docs = docs + excluded.docs",
            (thread_id, json.dumps(df, ensure_ascii=False)),
        )
        self._conn.execute(
            "UPDATE langmem_paging_fts_threads SET docs = docs + ?, length = length + ?, "
            "through = max(through, ?) WHERE thread_id = ?",
            (len(rows), length, max(map(page_number, given), default=0), thread_id),
        )

    def _delete_page(self, thread_id: str, page_id: str) -> None:
        rows = self._conn.execute(
            "SELECT body FROM langmem_paging_fts WHERE thread_id = ? AND page_id = ?", (thread_id, page_id)
        ).fetchall()
        self._conn.execute(
            "DELETE FROM langmem_paging_fts WHERE thread_id = ? AND page_id = ?", (thread_id, page_id)
        )
        self._conn.execute(
            "DELETE FROM langmem_paging_fts_pages WHERE thread_id = ? AND page_id = ?", (thread_id, page_id)
        )
        df: dict[str, int] = {}
        for (body,) in rows:
            for term in set(body.split()):
                df[term] = df.get(term, 0) + 1
        self._conn.executemany(
            "UPDATE langmem_paging_fts_df SET docs = docs - ? WHERE thread_id = ? AND term = ?",
            [(n, thread_id, term) for term, n in df.items()],
        )
        # a term no message holds any more leaves the table (its text must not outlive a forget)
        self._conn.executemany(
            "DELETE FROM langmem_paging_fts_df WHERE thread_id = ? AND term = ? AND docs <= 0",
            [(thread_id, term) for term in df],
        )
        self._conn.execute(
            "UPDATE langmem_paging_fts_threads SET docs = docs - ?, length = length - ? WHERE thread_id = ?",
            (len(rows), sum(len(r[0].split()) for r in rows), thread_id),
        )

    def _delete(self, thread_id: str) -> None:
        for table in (
            "langmem_paging_fts",
            "langmem_paging_fts_pages",
            "langmem_paging_fts_threads",
            "langmem_paging_fts_df",
        ):
            self._conn.execute(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))  # noqa: S608


def _common_limit(docs: int) -> float:
    return max(COMMON_MIN, COMMON_SHARE * docs)


def _selective(terms: list[str], df: dict[str, int], docs: int) -> list[str]:
    """The query's terms without the thread's very common ones (the rarest is always kept)."""
    limit = _common_limit(docs)
    ranked = sorted(terms, key=lambda t: df.get(t, 0))
    return [t for k, t in enumerate(ranked) if k == 0 or df.get(t, 0) <= limit]


def _bm25(words: list[str], terms: list[str], idf: dict[str, float], mean: float) -> float:
    """BM25 of one message (its terms) for the query's terms, as `bm25_scores` computes it."""
    norm = K1 * (1 - B + B * len(words) / mean)
    score = 0.0
    for term in terms:
        tf = words.count(term)
        if tf:
            score += idf[term] * tf * (K1 + 1) / (tf + norm)
    return score


def _idf(docs: int, freq: int) -> float:
    """BM25's IDF, as `bm25_scores` computes it."""
    return math.log(1 + (docs - freq + 0.5) / (freq + 0.5))


def _chunked(items: Iterable[Page], size: int) -> Iterator[list[Page]]:
    """Lists of `size` items, read from `items` only between the caller's writes."""
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk
