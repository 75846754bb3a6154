"""Serialize runs per thread in your own multi-process app: a Postgres advisory lock on a hash of
the thread id, held on a connection of its own around each run (docs/operators.md, "Deploy on the
Agent Server"). Without it, two runs on one thread at once both start from the same checkpoint and
the last to write wins: the other's turns leave the thread's latest branch."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg


def lock_key(thread_id: str) -> int:
    """A signed 64-bit key for ``pg_advisory_lock``: the same for a thread in every process."""
    return int.from_bytes(hashlib.blake2b(thread_id.encode(), digest_size=8).digest(), "big", signed=True)


@asynccontextmanager
async def thread_lock(uri: str, thread_id: str) -> AsyncIterator[None]:
    """Hold the thread's advisory lock while the block runs; a process that dies releases it
    (its connection closes)."""
    async with await psycopg.AsyncConnection.connect(uri, autocommit=True) as conn:
        await conn.execute("SELECT pg_advisory_lock(%s)", (lock_key(thread_id),))
        try:
            yield
        finally:
            await conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key(thread_id),))
