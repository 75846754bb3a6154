"""What the library knows of LangGraph's store tables, in one place: the index rows that live in a
store's own database follow its page records through this adapter.

LangGraph's `PostgresStore` and `SqliteStore` (the pinned versions: langgraph-checkpoint-postgres
3.x, langgraph-checkpoint-sqlite 3.x) keep every item in one table::

    store(prefix text, key text, value, created_at, updated_at, expires_at, ttl_minutes,
          PRIMARY KEY (prefix, key))

where ``prefix`` is the namespace joined with dots (``langmem_paging.<thread>.pages`` for a page; the
thread id with ``%`` and ``.`` escaped, as `storage.page_store.thread_namespace` writes it) and ``key``
the page id. Its own derived rows follow it the same way (``store_vectors`` references it with
``ON DELETE CASCADE``), so a record deleted by anyone (`store.delete`, `batch`, the Agent Server
deleting a thread, the TTL sweep) takes them along. The search indexes tie their rows to it the same
way: `PostgresSearchIndex` by a foreign key on a generated ``prefix`` column, `SqliteSearchIndex` (its
FTS5 table takes no foreign key) by a trigger on ``store``.

`check_postgres_store` and `check_sqlite_store` refuse, naming what changed, a store table of another
shape (tests/store/test_store_tables.py checks the pinned versions): a LangGraph upgrade that changed
it fails loudly at setup instead of leaving rows behind.
"""

from __future__ import annotations

import sqlite3
from typing import Any

__all__ = [
    "STORE_TABLE",
    "check_postgres_store",
    "check_sqlite_store",
    "pages_prefix_sql",
    "sqlite_thread_of_prefix_sql",
]

STORE_TABLE = "store"
"""LangGraph's table of store items (both backends)."""
KEY_COLUMNS = ("prefix", "key")
"""Its primary key: the namespace as text, and the item's key."""
_ROOT = "langmem_paging."
_PAGES = ".pages"


def pages_prefix_sql(thread: str, *, placeholders: bool = False) -> str:
    """SQL (PostgreSQL and SQLite alike) for the ``prefix`` of the `pages` namespace of the thread
    the expression `thread` yields: ``langmem_paging.<thread, % and . escaped>.pages``. With
    `placeholders`, its own ``%`` are doubled (a statement psycopg fills in)."""
    percent = "%%" if placeholders else "%"
    return f"'{_ROOT}' || replace(replace({thread}, '{percent}', '{percent}25'), '.', '{percent}2E') || '{_PAGES}'"


def sqlite_thread_of_prefix_sql(prefix: str) -> str:
    """SQLite: the thread id of a `pages` namespace's ``prefix`` (the inverse of `pages_prefix_sql`)."""
    start, trim = len(_ROOT) + 1, len(_ROOT) + len(_PAGES)
    return f"replace(replace(substr({prefix}, {start}, length({prefix}) - {trim}), '%2E', '.'), '%25', '%')"


def sqlite_is_pages_prefix_sql(prefix: str) -> str:
    """SQLite: whether ``prefix`` is a thread's `pages` namespace (three parts, the middle one a thread)."""
    middle = f"substr({prefix}, {len(_ROOT) + 1}, length({prefix}) - {len(_ROOT) + len(_PAGES)})"
    return f"({prefix} GLOB '{_ROOT}*{_PAGES}' AND instr({middle}, '.') = 0)"


_POSTGRES_KEY = f"""
SELECT array_agg(a.attname::text ORDER BY k.n) = %s::text[]
       AND bool_and(format_type(a.atttypid, a.atttypmod) = 'text')
  FROM pg_index i
  CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
 WHERE i.indrelid = to_regclass('{STORE_TABLE}') AND i.indisprimary
"""
"""True when the store table's primary key is (prefix text, key text); NULL when it has none."""


def postgres_store_check() -> tuple[str, tuple[Any, ...]]:
    """The statement `check_postgres_store` judges the answer of."""
    return _POSTGRES_KEY, (list(KEY_COLUMNS),)


def check_postgres_store(answer: Any) -> None:
    """Raise unless `postgres_store_check`'s answer says the store table is as this module expects."""
    if answer is not True:
        raise RuntimeError(_changed("PostgresStore"))


def check_sqlite_store(conn: sqlite3.Connection) -> None:
    """Raise unless the SQLite store table's primary key is (prefix, key) (hold the store's lock)."""
    columns = {row[1]: (row[2].lower(), row[5]) for row in conn.execute(f"PRAGMA table_info({STORE_TABLE})")}
    if [name for name, (_, pk) in sorted(columns.items(), key=lambda c: c[1][1]) if pk] != list(
        KEY_COLUMNS
    ) or any(columns[c][0] != "text" for c in KEY_COLUMNS):
        raise RuntimeError(_changed("SqliteStore"))


def _changed(kind: str) -> str:
    return (
        f"LangGraph's {kind} table `{STORE_TABLE}` no longer has the primary key (prefix text, key text) "
        "langmem_paging's search index ties its rows to (langmem_paging/index/store_tables.py). Pin the "
        "LangGraph store version this release supports, or pass `index=` a search index of your own."
    )
