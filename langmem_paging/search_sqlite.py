"""Passage search persisted beside a SQLite page store (SQLite FTS5): no cold start.

`InMemoryBM25Index` is rebuilt from the store the first time a process searches a thread, which
costs seconds to minutes on long threads after every restart. This index keeps the passages in
an FTS5 table of the store's own database file, so every process finds them indexed: a fresh
process's first search costs what a warm one does. Messages are indexed as the library's stemmed
terms (`search_terms`), so it matches as the in-process index does, and ranked by FTS5's BM25.

It is the default index of a file-backed `SqliteStore` (`langmem_paging.pager.default_index`);
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

import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langmem_paging.records import Page
from langmem_paging.search import Hit, SearchIndex, bm25_scores
from langmem_paging.text import search_terms
from langmem_paging.tokens import message_text

__all__ = ["SqliteSearchIndex", "sqlite_file_of"]

_DDL = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS langmem_paging_fts USING fts5("
    "body, thread_id UNINDEXED, page_id UNINDEXED, position UNINDEXED, tokenize='unicode61')",
    "CREATE TABLE IF NOT EXISTS langmem_paging_fts_pages (thread_id TEXT NOT NULL, page_id TEXT NOT NULL, "
    "PRIMARY KEY (thread_id, page_id))",
    "CREATE TABLE IF NOT EXISTS langmem_paging_fts_threads (thread_id TEXT PRIMARY KEY, "
    "docs INTEGER NOT NULL DEFAULT 0, length INTEGER NOT NULL DEFAULT 0)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS langmem_paging_fts_terms USING fts5vocab(langmem_paging_fts, 'row')",
]
COMMON_SHARE = 0.02
"""A query term in more than this share of the file's messages (and more than `COMMON_MIN` of them) is
left out of the match when rarer terms remain: it adds little to BM25 and makes FTS5 score every
message holding it (seconds at a million messages)."""
COMMON_MIN = 2000


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


def _quoted(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


class SqliteSearchIndex(SearchIndex):
    """Per-thread passage search in a SQLite file (FTS5), shared by every process using the file.

    Args:
        path: The database file (the page store's own file is a good home: one file to back up),
            or ``":memory:"`` for a private in-memory database (tests). Its own connection.
        conn: Instead of `path`, an open autocommit connection to share, with the `lock` that
            serializes its users (`for_store` shares a `SqliteStore`'s: the index lives and closes
            with the store, and the file's journal is checkpointed when the store closes).
        analyzer: Text -> terms, as the in-process index (default `search_terms`: stemmed words).
    """

    def __init__(self, path: str | None = None, *, conn: sqlite3.Connection | None = None,
                 lock: Any = None, analyzer: Callable[[str], list[str]] = search_terms) -> None:
        if path is not None and not isinstance(path, (str, os.PathLike)):  # e.g. a connection passed positionally
            raise TypeError(f"SqliteSearchIndex(path): `path` is a file path; got {type(path).__name__}. Pass an open "
                            "connection as SqliteSearchIndex(conn=conn, lock=lock).")
        if (path is None) == (conn is None):
            raise ValueError("Pass the database `path` or an open `conn` (with its `lock`), not both.")
        self.path, self.analyzer = path, analyzer
        self._conn = conn if conn is not None else sqlite3.connect(
            str(path), check_same_thread=False, timeout=30, isolation_level=None)
        self._lock = lock if lock is not None else threading.Lock()
        with self._lock:
            for statement in _DDL:
                self._conn.execute(statement)

    @classmethod
    def for_store(cls, store: Any) -> SqliteSearchIndex | None:
        """The index in a LangGraph `SqliteStore`'s file, on the store's own connection and lock (or,
        for an `AsyncSqliteStore`, a connection of its own to the file); None for an in-memory
        database or another store."""
        conn = getattr(store, "conn", None)
        if isinstance(conn, sqlite3.Connection) and isinstance(getattr(store, "lock", None), type(threading.Lock())):
            return cls(conn=conn, lock=store.lock) if sqlite_file_of(store) else None
        path = sqlite_file_of(store)
        return cls(path) if path else None

    def has(self, thread_id: str) -> bool:
        with self._lock:
            row = self._conn.execute("SELECT 1 FROM langmem_paging_fts_threads WHERE thread_id = ?",
                                     (thread_id,)).fetchone()
        return row is not None

    def load(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Index a thread from scratch (once: pages stored before this index existed)."""
        with self._lock, self._transaction():
            self._delete(thread_id)
            self._conn.execute("INSERT INTO langmem_paging_fts_threads (thread_id) VALUES (?)", (thread_id,))
            self._insert(thread_id, pages)

    def add(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Index a thread's new pages. A thread starts here with its first page (``p1``); one the
        index never saw start (its pages were stored before) is loaded by its first search."""
        pages = list(pages)
        with self._lock, self._transaction():
            known = self._conn.execute("SELECT 1 FROM langmem_paging_fts_threads WHERE thread_id = ?",
                                       (thread_id,)).fetchone()
            if known is None and any(page.id == "p1" for page in pages):
                self._conn.execute("INSERT INTO langmem_paging_fts_threads (thread_id) VALUES (?)", (thread_id,))
                known = (1,)
            if known is not None:
                self._insert(thread_id, pages)

    def update(self, thread_id: str, pages: Iterable[Page]) -> None:
        """Index pages whose content changed (a message forgotten) again."""
        pages = list(pages)
        with self._lock, self._transaction():
            for page in pages:
                self._delete_page(thread_id, page.id)
            self._insert(thread_id, pages)

    def drop(self, thread_id: str) -> None:
        with self._lock, self._transaction():
            self._delete(thread_id)

    def search(self, thread_id: str, query: str, *, limit: int, allow: Callable[[str], bool]) -> list[Hit]:
        terms = list(dict.fromkeys(self.analyzer(query)))
        if not terms:
            return []
        match = " OR ".join(_quoted(t) for t in self._selective(terms))
        take = limit
        while True:
            with self._lock:
                rows = self._conn.execute(
                    "SELECT page_id, position, -bm25(langmem_paging_fts) FROM langmem_paging_fts "
                    "WHERE langmem_paging_fts MATCH ? AND thread_id = ? ORDER BY bm25(langmem_paging_fts), "
                    "page_id, position LIMIT ?", (match, thread_id, take)).fetchall()
            hits = [Hit(page_id, int(position), float(score)) for page_id, position, score in rows
                    if allow(page_id)]
            if len(hits) >= limit or len(rows) < take:
                return hits[:limit]
            take *= 4

    def _selective(self, terms: list[str]) -> list[str]:
        """The query's terms without the very common ones (the rarest is always kept)."""
        with self._lock:
            total = self._conn.execute("SELECT coalesce(sum(docs), 0) FROM langmem_paging_fts_threads").fetchone()[0]
            placeholders = ",".join("?" * len(terms))
            docs = dict(self._conn.execute(
                f"SELECT term, doc FROM langmem_paging_fts_terms WHERE term IN ({placeholders})", terms).fetchall())
        limit = max(COMMON_MIN, COMMON_SHARE * total)
        ranked = sorted(terms, key=lambda t: docs.get(t, 0))
        return [t for k, t in enumerate(ranked) if k == 0 or docs.get(t, 0) <= limit]

    def score(self, thread_id: str, query: str, texts: Sequence[str]) -> list[float]:
        """BM25 of `texts` with the thread's document frequencies and lengths (on its hits' scale)."""
        terms = list(dict.fromkeys(self.analyzer(query)))
        with self._lock:
            stats = self._conn.execute("SELECT docs, length FROM langmem_paging_fts_threads WHERE thread_id = ?",
                                       (thread_id,)).fetchone()
            if not stats or not stats[0]:
                return bm25_scores(query, texts, analyzer=self.analyzer)
            freq = {t: self._conn.execute(
                "SELECT count(*) FROM langmem_paging_fts WHERE langmem_paging_fts MATCH ? AND thread_id = ?",
                (_quoted(t), thread_id)).fetchone()[0] for t in terms}
        return bm25_scores(query, texts, analyzer=self.analyzer, df=lambda t: freq.get(t, 0), n_docs=stats[0],
                           mean_length=stats[1] / stats[0])

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

    # -- rows ---------------------------------------------------------------------------
    def _insert(self, thread_id: str, pages: Iterable[Page]) -> None:
        docs = length = 0
        for page in pages:
            new = self._conn.execute("INSERT OR IGNORE INTO langmem_paging_fts_pages (thread_id, page_id) "
                                     "VALUES (?, ?)", (thread_id, page.id)).rowcount
            if not new:
                continue  # indexed already (pages never change; a changed one comes through `update`)
            rows = []
            for position, message in enumerate(page.messages):
                terms = self.analyzer(message_text(message))
                rows.append((" ".join(terms), thread_id, page.id, position))
                docs, length = docs + 1, length + len(terms)
            self._conn.executemany("INSERT INTO langmem_paging_fts (body, thread_id, page_id, position) "
                                   "VALUES (?, ?, ?, ?)", rows)
        self._conn.execute("UPDATE langmem_paging_fts_threads SET docs = docs + ?, length = length + ? "
                           "WHERE thread_id = ?", (docs, length, thread_id))

    def _delete_page(self, thread_id: str, page_id: str) -> None:
        rows = self._conn.execute("SELECT body FROM langmem_paging_fts WHERE thread_id = ? AND page_id = ?",
                                  (thread_id, page_id)).fetchall()
        self._conn.execute("DELETE FROM langmem_paging_fts WHERE thread_id = ? AND page_id = ?", (thread_id, page_id))
        self._conn.execute("DELETE FROM langmem_paging_fts_pages WHERE thread_id = ? AND page_id = ?",
                           (thread_id, page_id))
        self._conn.execute("UPDATE langmem_paging_fts_threads SET docs = docs - ?, length = length - ? "
                           "WHERE thread_id = ?", (len(rows), sum(len(r[0].split()) for r in rows), thread_id))

    def _delete(self, thread_id: str) -> None:
        for table in ("langmem_paging_fts", "langmem_paging_fts_pages", "langmem_paging_fts_threads"):
            self._conn.execute(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))  # noqa: S608
