"""Reads by primary key for a LangGraph `PostgresStore`: one prepared statement, one round trip.

`PostgresStore.batch` answers a batch of `GetOp`s with one query per namespace, each in pipeline
mode with a TTL-refresh CTE and its own sync: a page read (`PageStore.get_many` reads a page and its
access statistics, two namespaces) costs two queries and about seven client waits, where the
primary-key lookup itself takes 0.03 ms. On a shared machine every wait is a chance to be scheduled
out, which is where the store's recall-by-id p95 of 20-69 ms came from. `batch_reads` answers
a batch of reads alone with one prepared ``SELECT`` over ``store``'s primary key ``(prefix, key)``
for every namespace at once, and hands everything else (writes, searches, a store with TTLs, which
must refresh on read, an `AsyncPostgresStore`) to the store's own `batch`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.store.base import BaseStore, GetOp, Op

__all__ = ["batch_reads"]

_GET = """
SELECT s.prefix, s.key, s.value, s.created_at, s.updated_at
  FROM store s JOIN unnest(%s::text[], %s::text[]) AS k(prefix, key) ON s.prefix = k.prefix AND s.key = k.key
"""


def batch_reads(store: BaseStore, ops: Sequence[Op]) -> list[Any] | None:
    """The answers of `ops` read by primary key when `store` is a `PostgresStore` without TTLs and
    every op is a `GetOp`; None when the store's own `batch` must answer them."""
    if type(store).__name__ != "PostgresStore" or getattr(store, "ttl_config", None):
        return None
    if not ops or not all(type(op) is GetOp for op in ops):
        return None
    try:
        from langgraph.store.postgres.base import _namespace_to_text, _row_to_item
    except ImportError:  # a LangGraph whose internals moved: its own path still works
        return None
    gets: Sequence[GetOp] = ops  # type: ignore[assignment]
    prefixes = [_namespace_to_text(op.namespace) for op in gets]
    keys = [op.key for op in gets]
    with store._cursor() as cur:  # type: ignore[attr-defined]
        cur.execute(_GET, (prefixes, keys), prepare=True)
        rows = {(row["prefix"], row["key"]): row for row in cur.fetchall()}
    loader = getattr(store, "_deserializer", None)
    return [_row_to_item(op.namespace, row, loader=loader) if (row := rows.get((prefix, op.key))) else None
            for op, prefix in zip(gets, prefixes, strict=True)]
