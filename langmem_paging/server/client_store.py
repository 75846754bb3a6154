"""A LangGraph server's store through its store API (``/store/...``), as a `BaseStore`: what the
server app works on where the store object is not reachable, and what an operator uses against a
deployment from outside it (``ClientStore(get_client(url=...))``).

Every operation is one request of a `langgraph_sdk` async client. The sync `batch` runs them on the
event loop given at construction (from another thread, as `AsyncBatchedBaseStore` does). The store
API refuses namespace labels holding a period, so a thread id with one cannot be reached this way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

__all__ = ["ClientStore"]


class ClientStore(BaseStore):
    """A `BaseStore` over a LangGraph server's store API.

    Args:
        client: A `langgraph_sdk` async client (``get_client()``; in the server, in process).
        loop: The event loop the client runs on, for the sync `batch` called from another thread;
            default none (sync calls then raise).
    """

    supports_ttl = True

    def __init__(self, client: Any, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.client = client
        self.loop = loop

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if self.loop is None:
            raise RuntimeError(
                "ClientStore's sync calls need `loop=` (the event loop its client runs on, called from "
                "another thread); or use its async methods (`abatch`, `await PageStore(store).aforget(...)`)"
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(list(ops)), self.loop).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return [await self._one(op) for op in ops]

    async def _one(self, op: Op) -> Result:
        store = self.client.store
        if isinstance(op, GetOp):
            found = await store.get_item(list(op.namespace), op.key, refresh_ttl=op.refresh_ttl)
            return _item(found, Item) if found else None
        if isinstance(op, PutOp):
            if op.value is None:
                await store.delete_item(list(op.namespace), op.key)
            else:
                await store.put_item(list(op.namespace), op.key, op.value, index=op.index, ttl=op.ttl)
            return None
        if isinstance(op, SearchOp):
            found = await store.search_items(
                list(op.namespace_prefix),
                filter=op.filter,
                limit=op.limit,
                offset=op.offset,
                query=op.query,
                refresh_ttl=op.refresh_ttl,
            )
            return [_item(i, SearchItem) for i in found["items"]]
        if isinstance(op, ListNamespacesOp):
            conditions = {c.match_type: list(c.path) for c in op.match_conditions or ()}
            found = await store.list_namespaces(
                prefix=conditions.get("prefix"),
                suffix=conditions.get("suffix"),
                max_depth=op.max_depth,
                limit=op.limit,
                offset=op.offset,
            )
            return [tuple(n) for n in found["namespaces"]]
        raise ValueError(f"unknown store operation {op!r}")


def _item(found: dict[str, Any], kind: type[Item]) -> Any:
    extra = {"score": found.get("score")} if kind is SearchItem else {}
    return kind(
        namespace=tuple(found["namespace"]),
        key=found["key"],
        value=found["value"],
        created_at=found["created_at"],
        updated_at=found["updated_at"],
        **extra,
    )
