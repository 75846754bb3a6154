import contextlib
import importlib.util
import inspect

import pytest
import pytest_asyncio

from tests.support.backends import (
    BACKENDS,
    DATABASE_OF,
    LOCAL_FACTORIES,
    StoreLoop,
    truncate_store_tables,
)
from tests.support.postgres_server import fresh_database, postgres_uri_fixture, unavailable  # noqa: F401

STORE_FACTORIES = LOCAL_FACTORIES  # the in-process backends; Postgres ones come from fixtures below


def _postgres_driver_missing() -> str | None:
    for module, package in [
        ("psycopg", "psycopg[binary]"),
        ("psycopg_pool", "psycopg-pool"),
        ("langgraph.store.postgres", "langgraph-checkpoint-postgres"),
    ]:
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return f"{module} is not installed: pip install '{package}'"
    return None


@pytest.fixture(scope="session")
def store_database(postgres_uri):
    """One database for every Postgres-backed store test; the store's tables are made once."""
    missing = _postgres_driver_missing()
    if missing:
        unavailable(missing)
    from langgraph.store.postgres import PostgresStore

    uri = fresh_database(postgres_uri, "langmem_store_tests")
    with PostgresStore.from_conn_string(uri) as store:
        store.setup()
    return uri


@pytest.fixture(scope="session")
def store_loop():
    """A background event loop for AsyncPostgresStores used by sync tests."""
    loop = StoreLoop()
    yield loop
    loop.close()


@pytest.fixture
def postgres_store(store_database):
    """A `PostgresStore` on an emptied store table."""
    from langgraph.store.postgres import PostgresStore

    truncate_store_tables(store_database)
    with PostgresStore.from_conn_string(store_database) as store:
        DATABASE_OF[store] = store_database
        yield store


@contextlib.asynccontextmanager
async def _async_postgres_store(uri: str):
    from langgraph.store.postgres import AsyncPostgresStore

    async with AsyncPostgresStore.from_conn_string(uri) as store:
        DATABASE_OF[store] = uri
        yield store


@pytest_asyncio.fixture
async def apostgres_store_here(store_database):
    """An `AsyncPostgresStore` made in the running test's event loop (for async tests)."""
    truncate_store_tables(store_database)
    async with _async_postgres_store(store_database) as store:
        yield store


@pytest.fixture
def apostgres_store_on_loop(store_database, store_loop):
    """An `AsyncPostgresStore` living on a background loop (for sync tests: its `batch` is forwarded
    there from the test's thread, as from a worker thread of an async server)."""
    truncate_store_tables(store_database)
    context = _async_postgres_store(store_database)
    store = store_loop.run(context.__aenter__())
    yield store
    store_loop.run(context.__aexit__(None, None, None))


@pytest.fixture(params=BACKENDS)
def base_store(request):
    """Every LangGraph store backend the conformance suites run against."""
    name = request.param
    if name in LOCAL_FACTORIES:
        return LOCAL_FACTORIES[name]()
    if name == "postgres":
        return request.getfixturevalue("postgres_store")
    if inspect.iscoroutinefunction(request.function):
        return request.getfixturevalue("apostgres_store_here")
    return request.getfixturevalue("apostgres_store_on_loop")
