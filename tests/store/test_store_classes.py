"""What the library reads of other libraries' internals, each checked on the pinned versions: a
LangGraph or LangChain upgrade that moves one fails here, loudly, instead of silently taking the
slower path (or none).

- `langmem_paging.index.store_classes`: a store's class, connection, cursor, own put writer, setup
  flag and row decoding (one durable commit per step, the index on the store's connection, the
  one-round-trip reads);
- `PagingMiddleware.tools` reading `create_agent`'s ``tools`` (the recall tool's name clash refused
  where the agent is built);
- the run config a model call runs under (`traced`: paging's metadata on the model's run).
"""

from __future__ import annotations

import inspect
import json
import sqlite3
import threading

import pytest
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langmem_paging.index.store_classes import (
    ensure_setup,
    item_codec,
    store_class,
    store_cursor,
    store_row,
    write_puts,
)
from langmem_paging.storage.claims import InProcessClaims, PostgresClaims, SqliteClaims, claims_for
from tests.support.backends import DATABASE_OF


def _params(method) -> list[str]:
    return list(inspect.signature(method).parameters)


def test_a_sqlite_store_is_recognised_with_what_the_commit_uses(tmp_path):
    store = SqliteStore(sqlite3.connect(tmp_path / "s.db", check_same_thread=False, isolation_level=None))
    assert store_class(store) == "sqlite" and isinstance(claims_for(store), SqliteClaims)
    assert store.is_setup is False
    ensure_setup(store)
    assert store.is_setup is True
    assert _params(store._batch_put_ops) == ["put_ops", "cur"]  # what `write_puts` passes
    with store.lock:
        cursor = store.conn.cursor()
        write_puts(store, [], cursor)  # the store's own writer runs on a cursor it is given


def test_store_row_reads_what_a_sqlite_store_put(tmp_path):
    """The commit's lifecycle guard reads the store's row itself, in the claims' transaction."""
    store = SqliteStore(sqlite3.connect(tmp_path / "s.db", check_same_thread=False, isolation_level=None))
    store.setup()
    store.put(("langmem_paging", "t1", "meta"), "lifecycle", {"generation": "g1"})
    (value,) = store.conn.execute(
        *store_row("sqlite", ("langmem_paging", "t1", "meta"), "lifecycle")
    ).fetchone()
    assert json.loads(value) == {"generation": "g1"}
    assert (
        store.conn.execute(*store_row("sqlite", ("langmem_paging", "t", "meta"), "lifecycle")).fetchone()
        is None
    )


def test_store_row_reads_a_postgres_stores_row_and_holds_it_against_the_stores_writer(postgres_store):
    """Read in a transaction, the row keeps the store's own `put` (a forget's lifecycle write) waiting
    until the transaction ends: the forget then reads the records the transaction wrote."""
    namespace = ("langmem_paging", "t1", "meta")
    postgres_store.put(namespace, "lifecycle", {"generation": "g1"})
    claims = claims_for(postgres_store)
    assert isinstance(claims, PostgresClaims)
    written = threading.Event()

    from langgraph.store.postgres import PostgresStore

    def forget_writes() -> None:  # another worker: its own connection
        with PostgresStore.from_conn_string(DATABASE_OF[postgres_store]) as other:
            other.put(namespace, "lifecycle", {"generation": "g2"})
        written.set()

    with claims._transaction() as cur:
        cur.execute(*store_row("postgres", namespace, "lifecycle"))
        assert cur.fetchone()["value"] == {"generation": "g1"}
        writer = threading.Thread(target=forget_writes)
        writer.start()
        assert not written.wait(0.5), "the store's write went past a row read FOR SHARE"
    writer.join(10)
    assert written.is_set()
    assert postgres_store.get(namespace, "lifecycle").value == {"generation": "g2"}


def test_other_stores_take_the_public_path():
    assert store_class(InMemoryStore()) is None and isinstance(claims_for(InMemoryStore()), InProcessClaims)


def test_a_postgres_store_is_recognised_with_its_cursor_writer_and_codec(postgres_store):
    assert store_class(postgres_store) == "postgres" and isinstance(
        claims_for(postgres_store), PostgresClaims
    )
    assert _params(postgres_store._batch_put_ops) == ["put_ops", "cur"]
    with store_cursor(postgres_store) as cur:
        cur.execute("SELECT 1")
        write_puts(postgres_store, [], cur)
    codec = item_codec()
    assert codec is not None, "langgraph.store.postgres.base no longer has _namespace_to_text/_row_to_item"
    namespace_to_text, row_to_item = codec
    assert namespace_to_text(("a", "b")) == "a.b"
    assert hasattr(postgres_store, "_deserializer")  # the reads decode values as the store does


async def test_an_async_postgres_store_is_recognised_with_its_cursor_and_writer(apostgres_store_here):
    store = apostgres_store_here
    assert store_class(store) == "async-postgres" and isinstance(claims_for(store), PostgresClaims)
    assert hasattr(store, "loop") and _params(store._batch_put_ops) == ["put_ops", "cur"]
    async with store_cursor(store) as cur:
        await write_puts(store, [], cur)


def test_create_agent_still_hands_its_tools_to_the_middleware_reading_them():
    from langmem_paging.integrations import middleware

    code = middleware._CREATE_AGENT_CODE
    assert code is not None, (
        "langchain.agents.factory.create_agent moved: the clash check runs at the first call only"
    )
    assert {"tools", "middleware"} <= set(code.co_varnames), "create_agent's locals were renamed"


def test_the_run_config_variable_paging_traces_under_is_still_langchain_cores():
    from langchain_core.runnables.config import var_child_runnable_config

    from langmem_paging.integrations import middleware

    assert middleware.var_child_runnable_config is var_child_runnable_config
    token = var_child_runnable_config.set({"metadata": {"k": 1}})
    try:
        assert var_child_runnable_config.get() == {"metadata": {"k": 1}}
    finally:
        var_child_runnable_config.reset(token)


@pytest.mark.parametrize("name", ["conn", "lock"])
def test_the_sqlite_index_shares_the_stores_connection_and_lock(tmp_path, name):
    from langmem_paging.index.sqlite import SqliteSearchIndex

    store = SqliteStore(sqlite3.connect(tmp_path / "s.db", check_same_thread=False, isolation_level=None))
    index = SqliteSearchIndex.for_store(store)
    assert index is not None and getattr(index, f"_{name}") is getattr(store, name)
