"""Delete a thread's pages when the LangGraph server (Agent Server) deletes the thread.

The server deletes a thread's checkpoints on ``DELETE /threads/{thread_id}`` (the SDK's
``client.threads.delete``) and on ``POST /threads/prune`` with ``strategy="delete"``, but
pages live in its store under ``("langmem_paging", <thread>, ...)``, which it leaves alone.
`DeletePagesWithThreads` is ASGI middleware for the server's custom app: after the server answers
such a request with success, it deletes the threads' pages through the page lifecycle's entry point
(`PageStore.adelete_thread` on the server's store: records, number claims and search-index rows;
where that store object is not reachable, on its store API through the SDK client in process),
before the response goes out, so a client that sees the deletion succeed finds
the pages gone. It touches the store only then.

Threads the server deletes on its own (``checkpointer.ttl`` in ``langgraph.json``) go through no
HTTP request: give the pages a TTL too (``PagingMiddleware(ttl=...)`` on a store with TTL support).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from langgraph.store.base import BaseStore

from langmem_paging.server.client_store import ClientStore
from langmem_paging.server.reach import reach_store
from langmem_paging.storage.page_store import NAMESPACE_ROOT, PageStore

__all__ = ["DeletePagesWithThreads", "adelete_thread_pages"]

logger = logging.getLogger("langmem_paging")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_THREAD_PATH = re.compile(r"/threads/([^/]+)/?$")
_PRUNE_PATH = re.compile(r"/threads/prune/?$")


async def adelete_thread_pages(client: Any, thread_id: str) -> int:
    """Delete every page record of a thread through a LangGraph server's store API
    (`PageStore.adelete_thread` over a `ClientStore`).

    Args:
        client: A `langgraph_sdk` async client (``get_client(url=...)``; in the server, in process).
        thread_id: The thread.

    Returns:
        How many records were deleted.
    """
    return await PageStore(ClientStore(client)).adelete_thread(thread_id)


class DeletePagesWithThreads:
    """ASGI middleware: when the server deletes threads, delete their pages too.

    Args:
        app: The ASGI app to wrap (the server passes it).
        store: The store the pages are in; default the server's (`reach_store`), at deletion time.
        client: A `langgraph_sdk` async client, used only where no store is reachable; default the
            server's, in process (`server_client`).
    """

    def __init__(
        self, app: Callable[..., Awaitable[None]], store: BaseStore | None = None, client: Any = None
    ) -> None:
        self.app = app
        self.store = store
        self.client = client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope.get("type") == "http" else ""
        method = scope.get("method", "")
        single = _THREAD_PATH.search(path) if method == "DELETE" else None
        prune = _PRUNE_PATH.search(path) if method == "POST" else None
        if not (single or prune) or (single and single.group(1) == "prune"):
            await self.app(scope, receive, send)
            return
        body = bytearray()

        async def receive_and_keep() -> Message:
            message = await receive()
            if message.get("type") == "http.request":
                body.extend(message.get("body", b""))
            return message

        held: list[Message] = []
        status: list[int] = []

        async def hold(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            if status and 200 <= status[0] < 300:
                held.append(message)  # answered only once the pages are gone too
            else:
                await send(message)

        await self.app(scope, receive_and_keep, hold)
        if held:
            threads = [single.group(1)] if single else _pruned(bytes(body))
            for thread_id in threads:
                try:
                    n, how = await self._delete(thread_id)
                    logger.info("deleted %d page records of deleted thread %s (%s)", n, thread_id, how)
                except Exception:  # the thread is gone either way: say so loudly
                    logger.exception(
                        "could not delete the pages of deleted thread %s (namespace %r)",
                        thread_id,
                        (NAMESPACE_ROOT, thread_id),
                    )
            for message in held:
                await send(message)

    async def _delete(self, thread_id: str) -> tuple[int, str]:
        store, how = await reach_store(self.store, self.client)
        if store is None:
            raise RuntimeError(
                "no store to delete from: pass store= or client= (or run inside a LangGraph server)"
            )
        return await PageStore(store).adelete_thread(thread_id), how


def _pruned(body: bytes) -> list[str]:
    """Thread ids a prune request deletes (``strategy="delete"``, the default); [] for ``keep_latest``."""
    try:
        payload = json.loads(body or b"{}")
    except ValueError:
        return []
    if not isinstance(payload, dict) or payload.get("strategy", "delete") != "delete":
        return []
    return [str(t) for t in payload.get("thread_ids", []) if t]
