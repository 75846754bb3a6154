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
import sqlite3

import pytest
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langmem_paging.index.store_classes import ensure_setup, item_codec, store_class, store_cursor, write_puts
from langmem_paging.storage.claims import InProcessClaims, PostgresClaims, SqliteClaims, claims_for


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
