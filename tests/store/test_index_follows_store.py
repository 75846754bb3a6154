"""The search index comes with the store and its rows follow the store's page records (issue "Production
v5", items 1 and 2): a Postgres store gets the Postgres index on its own connection, and a page record
deleted by anyone (`store.delete`, `store.batch`, the TTL sweep) takes its index rows along, on Postgres
and on SQLite. The adapter that knows LangGraph's store table is checked on the pinned versions."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.base import PutOp
from langgraph.store.sqlite import SqliteStore

from langmem_paging import PageStore
from langmem_paging.core.records import Page
from langmem_paging.index.defaults import default_index
from langmem_paging.index.postgres import PostgresSearchIndex
from langmem_paging.index.sqlite import SqliteSearchIndex
from langmem_paging.index.store_tables import (
    check_sqlite_store,
    pages_prefix_sql,
    sqlite_is_pages_prefix_sql,
    sqlite_thread_of_prefix_sql,
)
from langmem_paging.storage.page_store import thread_namespace

ODD_THREADS = ["t", "a.b", "50%.x%2E", "tenant/ü.🦓"]


def _page(n: int, word: str) -> Page:
    return Page(
        id=f"p{n}",
        messages=[
            HumanMessage(f"The {word} slept near lantern{n}.", id=f"h{n}"),
            AIMessage("Noted.", id=f"a{n}"),
        ],
        bookmark=f"[p{n}:{word}]",
        keywords=[word],
        token_count=10,
        boundary="fixed_2",
        created_turn=n,
    )


# -- the adapter, on the pinned LangGraph versions -------------------------------------------------


def test_the_pinned_sqlite_store_table_is_the_shape_the_adapter_knows(tmp_path):
    store = SqliteStore(
        sqlite3.connect(str(tmp_path / "s.db"), check_same_thread=False, isolation_level=None)
    )
    store.setup()
    check_sqlite_store(store.conn)
    other = sqlite3.connect(":memory:")
    other.execute("CREATE TABLE store (namespace TEXT, key TEXT, value TEXT, PRIMARY KEY (namespace, key))")
    with pytest.raises(RuntimeError, match="no longer has the primary key"):
        check_sqlite_store(other)


@pytest.mark.parametrize("thread", ODD_THREADS)
def test_the_adapters_prefix_is_the_one_the_store_writes_and_reads_back(thread):
    from langgraph.store.sqlite.base import _namespace_to_text

    conn = sqlite3.connect(":memory:")
    prefix = _namespace_to_text(thread_namespace(thread, "pages"))
    assert conn.execute(f"SELECT {pages_prefix_sql('?')}", (thread,)).fetchone()[0] == prefix
    assert conn.execute(f"SELECT {sqlite_thread_of_prefix_sql(':p')}", {"p": prefix}).fetchone()[0] == thread
    assert conn.execute(f"SELECT {sqlite_is_pages_prefix_sql(':p')}", {"p": prefix}).fetchone()[0] == 1
    for other in ("langmem_paging.t.clusters", "langmem_paging.t.x.pages", "other.t.pages"):
        assert conn.execute(f"SELECT {sqlite_is_pages_prefix_sql(':p')}", {"p": other}).fetchone()[0] == 0


def test_the_pinned_postgres_store_table_is_the_shape_the_adapter_knows(postgres_store):
    from langgraph.store.postgres.base import _namespace_to_text

    index = PostgresSearchIndex.for_store(postgres_store)
    assert index is not None
    index.drop("__setup__")  # setup runs the check (it raises on another shape)
    with postgres_store._cursor() as cur:
        for thread in ODD_THREADS:
            cur.execute(f"SELECT {pages_prefix_sql('%s', placeholders=True)} AS p", (thread,))
            assert cur.fetchone()["p"] == _namespace_to_text(thread_namespace(thread, "pages"))


# -- deleted by anyone: no index row left -----------------------------------------------------------


def _sqlite_rows(store: SqliteStore, thread: str) -> tuple[int, int, int]:
    conn = store.conn
    fts = conn.execute("SELECT count(*) FROM langmem_paging_fts WHERE thread_id = ?", (thread,)).fetchone()[0]
    pages = conn.execute(
        "SELECT count(*) FROM langmem_paging_fts_pages WHERE thread_id = ?", (thread,)
    ).fetchone()[0]
    df = conn.execute("SELECT count(*) FROM langmem_paging_fts_df WHERE thread_id = ?", (thread,)).fetchone()[
        0
    ]
    return fts, pages, df


def _postgres_rows(store, thread: str) -> tuple[int, int]:
    with store._cursor() as cur:
        cur.execute("SELECT count(*) AS n FROM langmem_paging_passages WHERE thread_id = %s", (thread,))
        passages = cur.fetchone()["n"]
        cur.execute(
            "SELECT coalesce(max(docs), 0) AS n FROM langmem_paging_passages_terms WHERE thread_id = %s AND lexeme = ''",
            (thread,),
        )
        return passages, cur.fetchone()["n"]


def _expire(store, thread: str, key: str) -> None:
    ns = ".".join(thread_namespace(thread, "pages"))
    sql = "UPDATE store SET expires_at = {past} WHERE prefix = {p} AND key = {p}"
    if isinstance(store, SqliteStore):
        store.conn.execute(sql.format(past="datetime('now', '-1 minute')", p="?"), (ns, key))
    else:
        with store._cursor() as cur:
            cur.execute(sql.format(past="now() - interval '1 minute'", p="%s"), (ns, key))


@pytest.fixture(params=["sqlite", "postgres"])
def ttl_store(request, tmp_path):
    """A file-backed SqliteStore or a PostgresStore, both with TTL support."""
    ttl = {"default_ttl": 60, "refresh_on_read": False}
    if request.param == "sqlite":
        conn = sqlite3.connect(str(tmp_path / "pages.db"), check_same_thread=False, isolation_level=None)
        store = SqliteStore(conn, ttl=ttl)
        store.setup()
        yield store
        conn.close()
        return
    from langgraph.store.postgres import PostgresStore

    from tests.support.backends import truncate_store_tables

    uri = request.getfixturevalue("store_database")
    truncate_store_tables(uri)
    with PostgresStore.from_conn_string(uri, ttl=ttl) as store:
        yield store


@pytest.mark.parametrize("thread", ["t", "a.b%c"])
def test_a_page_record_deleted_by_anyone_takes_its_index_rows_along(ttl_store, thread):
    index = default_index(ttl_store)
    kind = SqliteSearchIndex if isinstance(ttl_store, SqliteStore) else PostgresSearchIndex
    assert isinstance(index, kind)
    pages = PageStore(ttl_store)
    words = ["heron", "otter", "badger", "marten"]
    for n, word in enumerate(words, start=1):
        pages.put(thread, _page(n, word))
    index.add(thread, [_page(n, word) for n, word in enumerate(words, start=1)])
    rows = _sqlite_rows if isinstance(ttl_store, SqliteStore) else _postgres_rows
    assert rows(ttl_store, thread)[0] == 8

    def found(word: str) -> list[str]:
        return [h.page_id for h in index.search(thread, word, limit=5, allow=lambda p: True)]

    assert found("heron") == ["p1"]
    ns = thread_namespace(thread, "pages")
    ttl_store.delete(ns, "p1")  # the store's API
    ttl_store.batch([PutOp(ns, "p2", None)])  # a batch (the Agent Server's thread deletion)
    _expire(ttl_store, thread, "p3")
    assert ttl_store.sweep_ttl() == 1  # the TTL sweep
    assert rows(ttl_store, thread)[0] == 2  # p4's two messages only
    assert found("heron") == found("otter") == found("badger") == [] and found("marten") == ["p4"]
    if isinstance(ttl_store, SqliteStore):
        from langmem_paging.core.text import search_terms

        assert rows(ttl_store, thread)[1] == 1
        left = {t for m in _page(4, "marten").messages for t in search_terms(str(m.content))}
        terms = ttl_store.conn.execute(
            "SELECT term, docs FROM langmem_paging_fts_df WHERE thread_id = ?", (thread,)
        )
        assert dict(terms.fetchall()) == dict.fromkeys(left, 1)  # the frequencies follow the rows
        assert ttl_store.conn.execute(
            "SELECT docs FROM langmem_paging_fts_threads WHERE thread_id = ?", (thread,)
        ).fetchone() == (2,)
    else:
        assert rows(ttl_store, thread)[1] == 2  # the frequencies follow the passages
        assert index.document_frequencies(thread, words) == {"marten": 1}
    ttl_store.delete(ns, "p4")
    assert rows(ttl_store, thread) == ((0, 0, 0) if isinstance(ttl_store, SqliteStore) else (0, 0))
    assert found("marten") == []


def test_an_async_postgres_store_gets_its_index_sync_calls_run_on_its_loop(apostgres_store_on_loop):
    store = apostgres_store_on_loop
    index = default_index(store)
    assert isinstance(index, PostgresSearchIndex) and index._async is store.conn
    pages = PageStore(store)
    pages.put("t", _page(1, "heron"))
    index.add("t", [_page(1, "heron")])  # sync, from this thread: run on the store's loop
    assert [h.page_id for h in index.search("t", "heron", limit=3, allow=lambda p: True)] == ["p1"]
    store.batch([PutOp(thread_namespace("t", "pages"), "p1", None)])
    assert index.search("t", "heron", limit=3, allow=lambda p: True) == []


# -- a fresh worker searches the rows in Postgres --------------------------------------------------

FRESH_WORKER = """
import json, sys
from langgraph.store.postgres import PostgresStore
from langmem_paging import PagingConfig, PageStore
from langmem_paging.index.base import InMemoryBM25Index
from langmem_paging.runtime.pager import Pager

def refused(*args, **kwargs):
    raise AssertionError("the in-process index was used")

InMemoryBM25Index.__init__ = refused
with PostgresStore.from_conn_string(sys.argv[1]) as store:
    pager = Pager(PagingConfig(max_tokens=300, boundary="fixed_2"), PageStore(store))
    print(pager.recall("t", json.loads(sys.argv[2]), query="How many swans did Mirela3 count?").content)
"""


def test_a_fresh_worker_with_a_postgres_store_and_no_index_searches_the_rows_in_postgres(postgres_store):
    import json

    from langmem_paging import PagingConfig
    from langmem_paging.runtime.pager import Pager
    from tests.support.backends import DATABASE_OF

    pager = Pager(PagingConfig(max_tokens=300, boundary="fixed_2"), PageStore(postgres_store))  # no index=
    messages, value = [], {}
    for i in range(12):
        messages.append(
            HumanMessage(f"Day {i}: Mirela{i} counted {i * 7} swans on Lake Bohinj{i}.", id=f"h{i}")
        )
        result = pager.step(messages, value, "t")
        messages, value = result.apply(messages) + [AIMessage("Noted.", id=f"a{i}")], result.state.to_value()
    assert _postgres_rows(postgres_store, "t")[0] >= 8  # the rows exist in Postgres before the worker starts
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FRESH_WORKER), DATABASE_OF[postgres_store], json.dumps(value)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Mirela3 counted 21 swans" in done.stdout


async def test_a_sync_call_on_the_async_stores_own_loop_is_refused_naming_the_async_method(
    apostgres_store_here,
):
    import asyncio

    index = default_index(apostgres_store_here)
    assert await index.asearch("t", "heron", limit=3, allow=lambda p: True) == []
    with pytest.raises(asyncio.InvalidStateError, match="asearch"):
        index.search("t", "heron", limit=3, allow=lambda p: True)


def test_a_passage_table_made_from_a_uri_before_gets_the_key_and_loses_rows_of_gone_records(postgres_store):
    import psycopg

    from tests.support.backends import DATABASE_OF

    uri = DATABASE_OF[postgres_store]
    with psycopg.connect(uri, autocommit=True) as conn:  # the tables as no release of this one made them
        conn.execute(
            "DROP TABLE IF EXISTS langmem_paging_passages, langmem_paging_passages_terms, "
            "langmem_paging_passages_threads CASCADE"
        )
        conn.execute("DROP FUNCTION IF EXISTS langmem_paging_passages_search CASCADE")
    PageStore(postgres_store).put("t", _page(1, "heron"))  # p9's record never existed (or was deleted)
    by_hand = PostgresSearchIndex(uri)  # what the README had users build
    by_hand.add("t", [_page(1, "heron")] + [_page(n, "otter") for n in range(2, 10)])
    by_hand.close()
    with psycopg.connect(uri, autocommit=True) as conn:  # as the previous release left the table
        conn.execute("DROP FUNCTION langmem_paging_passages_search")
        conn.execute("DROP TRIGGER langmem_paging_passages_ins ON langmem_paging_passages")
        conn.execute("DROP TRIGGER langmem_paging_passages_del ON langmem_paging_passages")
        conn.execute("ALTER TABLE langmem_paging_passages DROP COLUMN prefix")
    assert _postgres_rows(postgres_store, "t") == (18, 18)
    index = default_index(postgres_store)
    assert [h.page_id for h in index.search("t", "heron", limit=3, allow=lambda p: True)] == ["p1"]
    assert _postgres_rows(postgres_store, "t") == (2, 2)  # the passages of records that are gone went
    assert index.search("t", "otter", limit=3, allow=lambda p: True) == []
    postgres_store.delete(thread_namespace("t", "pages"), "p1")
    assert _postgres_rows(postgres_store, "t") == (0, 0)  # the key is in place
