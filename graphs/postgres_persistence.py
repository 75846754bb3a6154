"""A Postgres store and checkpointer for the LangGraph server, by path from ``langgraph.json``::

    "store": {"path": "./graphs/postgres_persistence.py:store"},
    "checkpointer": {"path": "./graphs/postgres_persistence.py:checkpointer"}

Both read the database URI from ``$LANGMEM_PAGING_STORE`` (the variable the ``langmem-paging`` CLI
reads too, so ``langmem-paging verify THREAD`` checks the same database). The server enters each
once per worker process: one connection each per worker. Their tables are made once, before the
workers start (``python -m graphs.postgres_persistence``): workers that each ran ``setup()`` at once
race on the migration tables and all but one fail to start (seen with 2 uvicorn workers).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.store.postgres import AsyncPostgresStore

URI_ENV = "LANGMEM_PAGING_STORE"


def uri() -> str:
    uri = os.environ.get(URI_ENV, "")
    if not uri.startswith(("postgres://", "postgresql://")):
        raise RuntimeError(
            f"graphs/postgres_persistence.py needs ${URI_ENV} set to a Postgres URI "
            f"(postgresql://user@host:5432/db), got {uri!r}"
        )
    return uri


@contextlib.asynccontextmanager
async def store() -> AsyncIterator[AsyncPostgresStore]:
    """An `AsyncPostgresStore` on ``$LANGMEM_PAGING_STORE``."""
    async with AsyncPostgresStore.from_conn_string(uri()) as pg_store:
        yield pg_store


@contextlib.asynccontextmanager
async def checkpointer() -> AsyncIterator[AsyncPostgresSaver]:
    """An `AsyncPostgresSaver` on ``$LANGMEM_PAGING_STORE``."""
    async with AsyncPostgresSaver.from_conn_string(uri()) as saver:
        yield saver


async def setup() -> None:
    """Create (or migrate) the store's and the checkpointer's tables: once, before the workers."""
    async with store() as pg_store, checkpointer() as saver:
        await pg_store.setup()
        await saver.setup()


if __name__ == "__main__":
    import asyncio

    asyncio.run(setup())
