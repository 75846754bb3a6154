"""Stores a case runs on."""

from __future__ import annotations


def _sqlite_store():
    import sqlite3

    from langgraph.store.sqlite import SqliteStore

    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    return store
