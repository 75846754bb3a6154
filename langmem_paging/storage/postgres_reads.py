"""Reads by primary key for a LangGraph `PostgresStore` or `AsyncPostgresStore`: one prepared
statement, one round trip.

`PostgresStore.batch` answers a batch of `GetOp`s with one query per namespace, each in pipeline
mode with a TTL-refresh CTE and its own sync: a page read (`PageStore.get_many` reads a page and its
access statistics, two namespaces) costs two queries and about seven client waits, where the
primary-key lookup itself takes 0.03 ms. On a shared machine every wait is a chance to be scheduled
out, which is where the store's recall-by-id p95 of 20-69 ms came from. `batch_reads` (sync store)
and `abatch_reads` (async store) answer a batch of reads alone with one prepared ``SELECT`` over
``store``'s primary key ``(prefix, key)`` for every namespace at once, and hand everything else
(writes, searches, a store with TTLs, which must refresh on read) to the store's own `batch`.

Both are one source: `_reads` is the read written once, as a generator of statements that a sync
or an async cursor answers.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from langgraph.store.base import BaseStore, GetOp, Op

from langmem_paging.core.effects import adrive, drive
from langmem_paging.index.store_classes import StoreClass, item_codec, store_class, store_cursor

__all__ = ["abatch_reads", "batch_reads"]

_GET = """
SELECT s.prefix, s.key, s.value, s.created_at, s.updated_at
  FROM store s JOIN unnest(%s::text[], %s::text[]) AS k(prefix, key) ON s.prefix = k.prefix AND s.key = k.key
"""

_Query = tuple[str, tuple[Any, ...]]
_Reads = Generator[_Query, list[Any], list[Any]]


def batch_reads(store: BaseStore, ops: Sequence[Op]) -> list[Any] | None:
    """The answers of `ops` read by primary key when `store` is a `PostgresStore` without TTLs and
    every op is a `GetOp`; None when the store's own `batch` must answer them."""
    reads = _reads(store, ops, "postgres")
    if reads is None:
        return None
    with store_cursor(store) as cur:

        def fetch(query: _Query) -> list[Any]:
            cur.execute(*query, prepare=True)
            return list(cur.fetchall())

        return drive(reads, fetch)


async def abatch_reads(store: BaseStore, ops: Sequence[Op]) -> list[Any] | None:
    """`batch_reads` for an `AsyncPostgresStore` (awaited on its cursor)."""
    reads = _reads(store, ops, "async-postgres")
    if reads is None:
        return None
    async with store_cursor(store) as cur:

        async def fetch(query: _Query) -> list[Any]:
            await cur.execute(*query, prepare=True)
            return list(await cur.fetchall())

        return await adrive(reads, fetch)


def _reads(store: BaseStore, ops: Sequence[Op], kind: StoreClass) -> _Reads | None:
    """The primary-key read of `ops` on a store of class `kind`, or None when it does not apply."""
    if store_class(store) != kind or getattr(store, "ttl_config", None):
        return None
    if not ops or not all(type(op) is GetOp for op in ops) or (codec := item_codec()) is None:
        return None
    _namespace_to_text, _row_to_item = codec
    gets: Sequence[GetOp] = ops  # type: ignore[assignment]

    def reads() -> _Reads:
        prefixes = [_namespace_to_text(op.namespace) for op in gets]
        found = yield _GET, (prefixes, [op.key for op in gets])
        rows = {(row["prefix"], row["key"]): row for row in found}
        loader = getattr(store, "_deserializer", None)
        return [
            _row_to_item(op.namespace, row, loader=loader) if (row := rows.get((prefix, op.key))) else None
            for op, prefix in zip(gets, prefixes, strict=True)
        ]

    return reads()
