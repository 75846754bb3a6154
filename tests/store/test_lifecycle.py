"""What docs/operators.md says about a thread's lifetime: pages expire with a TTL once the store
sweeps, a store's own default TTL does not reach them, and the operator tools' reads never
extend a TTL."""

from __future__ import annotations

import sqlite3
import time

import pytest
from langchain_core.messages import HumanMessage
from langgraph.store.sqlite import SqliteStore

from langmem_paging import Page, PageStore
from langmem_paging.ops import export_records, import_records, inspect_thread, without_ttl_refresh


def page(n: int) -> Page:
    return Page(
        id=f"p{n}",
        messages=[HumanMessage(f"note {n}", id=f"m{n}")],
        bookmark=f"[p{n}:note]",
        keywords=["note"],
        token_count=3,
        boundary="fixed_2",
        created_turn=n,
    )


@pytest.fixture
def conn():
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    yield conn
    conn.close()


def expiry(conn, key: str):
    return conn.execute(
        "SELECT expires_at FROM store WHERE key = ? AND prefix LIKE '%.pages'", (key,)
    ).fetchone()


def test_pages_expire_with_their_ttl_or_the_store_default_when_the_store_sweeps(conn):
    store = SqliteStore(conn, ttl={"default_ttl": 0.001})  # 60 ms, for everything put without a ttl
    store.setup()
    PageStore(store, ttl=0.001).put("t", page(1))
    PageStore(store).put("t", page(2))  # no `ttl`: the store's default applies (0.1 wrote "no expiry")
    PageStore(SqliteStore(conn)).put("u", page(3))  # a store without a default: kept until deleted
    store.put(("other",), "k", {"v": 1})
    assert expiry(conn, "p2")[0] is not None and expiry(conn, "p3")[0] is None  # (row deleted: None)

    deadline = time.monotonic() + 10  # SQLite compares expiry at whole seconds
    while (expiry(conn, "p1") is not None or expiry(conn, "p2") is not None) and time.monotonic() < deadline:
        store.sweep_ttl()
        time.sleep(0.1)

    assert PageStore(store).get("t", "p1") is None
    assert PageStore(store).get("t", "p2") is None
    assert PageStore(store).get("u", "p3") is not None
    assert store.get(("other",), "k") is None


def test_operator_reads_do_not_extend_a_ttl(conn):
    store = SqliteStore(conn, ttl={"refresh_on_read": True})
    store.setup()
    PageStore(store, ttl=60).put("t", page(1))
    before = expiry(conn, "p1")

    quiet = PageStore(without_ttl_refresh(store))
    quiet.get("t", "p1")
    inspect_thread(quiet, "t")
    export_records(without_ttl_refresh(store), "t")
    assert expiry(conn, "p1") == before

    PageStore(store).get("t", "p1")  # the library's own reads do refresh it (refresh_on_read)
    assert expiry(conn, "p1") != before


def test_import_keeps_a_ttl_only_on_stores_that_support_one(conn):
    from langgraph.store.memory import InMemoryStore

    records = [{"thread": "t", "kind": "pages", "key": "p1", "value": page(1).to_dict()}]
    with pytest.raises(ValueError, match="`ttl` needs a store with TTL support"):
        import_records(InMemoryStore(), records, ttl=5)
    store = SqliteStore(conn)
    store.setup()
    assert import_records(store, records, thread_id="u", ttl=5) == {"u": 1}
    assert expiry(conn, "p1") is not None
