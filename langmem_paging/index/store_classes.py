"""What the library reads of LangGraph's store classes beyond their public API, in one place.

One durable commit per step (claims, records and passages in one transaction), the search index on
the store's own connection and the one-round-trip reads need a store's connection, its cursor, its
own writer of put operations and its row decoding, none of which `BaseStore` offers. Every such use
goes through this module, and tests/store/test_store_classes.py checks each one on the pinned
versions (langgraph-checkpoint-sqlite 3.x, langgraph-checkpoint-postgres 3.x): an upgrade that moves
one fails there, loudly, instead of silently falling back to the slower path.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, Literal

from langgraph.store.base import Op

__all__ = [
    "StoreClass",
    "ensure_setup",
    "item_codec",
    "store_class",
    "store_cursor",
    "store_row",
    "write_puts",
]

StoreClass = Literal["sqlite", "postgres", "async-postgres"]


def store_class(store: Any) -> StoreClass | None:
    """Which LangGraph store `store` is, by class name (the backends are optional imports), when it
    has what the library uses of it; None for any other store (the library then uses `batch` only)."""
    kind = type(store).__name__
    if kind == "SqliteStore":
        usable = isinstance(getattr(store, "conn", None), sqlite3.Connection) and hasattr(store, "lock")
        return "sqlite" if usable else None
    if kind in ("PostgresStore", "AsyncPostgresStore") and hasattr(store, "_cursor"):
        return "postgres" if kind == "PostgresStore" else "async-postgres"
    return None


def ensure_setup(store: Any) -> None:
    """Run the store's `setup` if it says it has not run (``is_setup``; a store without it is ready)."""
    if not getattr(store, "is_setup", True):
        store.setup()


def write_puts(store: Any, ops: Sequence[Op], cursor: Any) -> Any:
    """The store's own writer of put operations on `cursor`, a cursor of the caller's transaction
    (``SqliteStore``/``PostgresStore._batch_put_ops``; on an ``AsyncPostgresStore`` an awaitable)."""
    return store._batch_put_ops(list(enumerate(ops)), cursor)


def store_row(kind: StoreClass, namespace: tuple[str, ...], key: str) -> tuple[str, tuple[str, str]]:
    """A statement and its parameters reading one item's value (table ``store``: ``prefix``, the
    namespace joined by dots, and ``key``) in the caller's transaction; on Postgres ``FOR SHARE``."""
    sql = "SELECT value FROM store WHERE prefix = ? AND key = ?"
    if kind != "sqlite":
        sql = sql.replace("?", "%s") + " FOR SHARE"
    return sql, (".".join(namespace), key)


def store_cursor(store: Any) -> Any:
    """A cursor context of a Postgres store's connection or pool (``_cursor``; async for an
    ``AsyncPostgresStore``)."""
    return store._cursor()


def item_codec() -> tuple[Callable[..., str], Callable[..., Any]] | None:
    """The Postgres store's namespace-to-text and row-to-`Item` functions (``_namespace_to_text``,
    ``_row_to_item``), or None where a LangGraph moved them (its own `batch` path still works)."""
    try:
        from langgraph.store.postgres.base import _namespace_to_text, _row_to_item
    except ImportError:
        return None
    return _namespace_to_text, _row_to_item
