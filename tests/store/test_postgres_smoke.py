"""LangGraph's Postgres store and checkpointer work against the throwaway server of postgres_server.py."""

from __future__ import annotations

import importlib.util
import operator
import time
from typing import Annotated, TypedDict

import pytest

from tests.support.postgres_server import (  # postgres_uri: the session's server (conftest.py)
    fresh_database,
    unavailable,
)

for _module, _package in [
    ("psycopg", "psycopg[binary]"),
    ("psycopg_pool", "psycopg-pool"),
    ("langgraph.store.postgres", "langgraph-checkpoint-postgres"),
]:
    try:
        _found = importlib.util.find_spec(_module) is not None
    except ModuleNotFoundError:
        _found = False
    if not _found:
        unavailable(f"{_module} is not installed: pip install '{_package}'")

from langgraph.checkpoint.postgres import PostgresSaver  # noqa: E402 - after the check that the driver is installed
from langgraph.graph import END, START, StateGraph  # noqa: E402 - after the check that the driver is installed
from langgraph.store.postgres import AsyncPostgresStore, PostgresStore  # noqa: E402 - after the check that the driver is installed


@pytest.fixture
def db_uri(postgres_uri, request):
    """A fresh database per test: the store's and the saver's tables have fixed names."""
    return fresh_database(postgres_uri, f"smoke_{request.node.name}".lower()[:60])


def test_store_put_get_search(db_uri):
    with PostgresStore.from_conn_string(db_uri) as store:
        store.setup()
        store.put(("pages", "thread-1"), "p1", {"text": "Farid adopted a greyhound", "n": 1})
        store.put(("pages", "thread-1"), "p2", {"text": "Trip to Lisbon", "n": 2})
        store.put(("pages", "thread-2"), "p1", {"text": "other thread", "n": 1})

        item = store.get(("pages", "thread-1"), "p1")
        assert item is not None and item.value == {"text": "Farid adopted a greyhound", "n": 1}
        assert item.namespace == ("pages", "thread-1") and item.key == "p1"
        assert store.get(("pages", "thread-1"), "missing") is None

        assert {i.key for i in store.search(("pages", "thread-1"))} == {"p1", "p2"}
        assert len(store.search(("pages",))) == 3  # a namespace prefix reaches its descendants
        assert [i.key for i in store.search(("pages", "thread-1"), filter={"n": 2})] == ["p2"]
        assert store.list_namespaces(prefix=("pages",)) == [("pages", "thread-1"), ("pages", "thread-2")]

        store.delete(("pages", "thread-1"), "p1")
        assert store.get(("pages", "thread-1"), "p1") is None


def test_store_ttl(db_uri):
    with PostgresStore.from_conn_string(db_uri, ttl={"default_ttl": 60, "refresh_on_read": True}) as store:
        store.setup()
        assert store.supports_ttl
        store.put(("ns",), "k", {"v": 1}, ttl=0.001)  # minutes
        store.put(("ns",), "keep", {"v": 2})  # default_ttl
        with store._cursor() as cur:
            cur.execute("SELECT key, ttl_minutes FROM store ORDER BY key")
            assert [(r["key"], r["ttl_minutes"]) for r in cur] == [("k", 0), ("keep", 60)]
        deadline = time.monotonic() + 5
        while store.sweep_ttl() == 0 and time.monotonic() < deadline:  # "k" lives 0.06 s
            time.sleep(0.05)
        assert store.get(("ns",), "k") is None and store.get(("ns",), "keep") is not None


async def test_async_store_put_get_search(db_uri):
    async with AsyncPostgresStore.from_conn_string(db_uri) as store:
        await store.setup()
        await store.aput(("pages", "thread-1"), "p1", {"text": "Farid adopted a greyhound"})
        await store.aput(("pages", "thread-1"), "p2", {"text": "Trip to Lisbon"})
        item = await store.aget(("pages", "thread-1"), "p2")
        assert item is not None and item.value == {"text": "Trip to Lisbon"}
        assert {i.key for i in await store.asearch(("pages",))} == {"p1", "p2"}
        await store.adelete(("pages", "thread-1"), "p2")
        assert await store.aget(("pages", "thread-1"), "p2") is None


def test_store_kept_open_on_a_pool(db_uri):
    """A store for a whole app or session: a pool with the connection settings the store needs."""
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(db_uri, min_size=1, max_size=4, kwargs=kwargs, open=True) as pool:
        store = PostgresStore(pool)
        store.setup()
        store.put(("a",), "k", {"v": 1})
        assert PostgresStore(pool).get(("a",), "k").value == {"v": 1}


class Counter(TypedDict):
    total: Annotated[int, operator.add]
    seen: Annotated[list[str], operator.add]


def _add(state: Counter) -> dict:
    return {"total": 1, "seen": [f"turn{state['total'] + 1}"]}


def test_saver_persists_graph_state(db_uri):
    builder = StateGraph(Counter)
    builder.add_node("add", _add)
    builder.add_edge(START, "add")
    builder.add_edge("add", END)
    config = {"configurable": {"thread_id": "t1"}}

    with PostgresSaver.from_conn_string(db_uri) as saver:
        saver.setup()
        graph = builder.compile(checkpointer=saver)
        assert graph.invoke({"total": 0, "seen": []}, config) == {"total": 1, "seen": ["turn1"]}
        assert graph.invoke({"total": 0, "seen": []}, config) == {"total": 2, "seen": ["turn1", "turn2"]}

    with PostgresSaver.from_conn_string(db_uri) as saver:  # a new connection sees the saved state
        graph = builder.compile(checkpointer=saver)
        assert graph.get_state(config).values == {"total": 2, "seen": ["turn1", "turn2"]}
        assert graph.get_state({"configurable": {"thread_id": "other"}}).values == {}
        assert len(list(saver.list(config))) >= 2


def test_full_text_search_is_built_in(postgres_uri):
    import psycopg

    with psycopg.connect(postgres_uri) as conn:
        hit = conn.execute(
            "SELECT to_tsvector('english', %s) @@ websearch_to_tsquery('english', %s)",
            ("My cousin Farid adopted two greyhounds", '"cousin farid" greyhound -cat'),
        ).fetchone()[0]
    assert hit is True


def test_reads_by_primary_key_answer_as_the_store_does(db_uri):
    """`batch_reads` (one prepared SELECT for every namespace) gives what `PostgresStore.batch` gives;
    a store with TTLs (reads refresh them) is left to its own batch."""
    from langgraph.store.base import GetOp, PutOp

    from langmem_paging.storage.postgres_reads import batch_reads

    with PostgresStore.from_conn_string(db_uri) as store:
        store.setup()
        store.batch(
            [
                PutOp(("langmem_paging", "t1", "pages"), "p1", {"a": "x\\0"}),
                PutOp(("langmem_paging", "t1", "stats"), "p1", {"count": 2}),
                PutOp(("langmem_paging", "t", "pages"), "p1", {"other": "thread"}),
            ]
        )
        ops = [
            GetOp(("langmem_paging", "t1", "pages"), "p1"),
            GetOp(("langmem_paging", "t1", "stats"), "p1"),
            GetOp(("langmem_paging", "t1", "pages"), "p9"),
            GetOp(("langmem_paging", "t", "pages"), "p1"),
        ]
        fast = batch_reads(store, ops)
        assert fast is not None and [i and (i.namespace, i.key, i.value) for i in fast] == [
            i and (i.namespace, i.key, i.value) for i in store.batch(ops)
        ]
        assert fast[2] is None and fast[3].value == {"other": "thread"}
        assert batch_reads(store, [*ops, PutOp(("a",), "k", {"v": 1})]) is None  # writes: the store's batch
    with PostgresStore.from_conn_string(db_uri, ttl={"default_ttl": 60, "refresh_on_read": True}) as store:
        assert batch_reads(store, ops) is None
