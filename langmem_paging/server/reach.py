"""How the server app reaches the LangGraph server (Agent Server) it runs in: its store, its SDK
client in process, and a thread's checkpoints. The one module that knows the server's internals.

Inside the Agent Server a custom app (``"http": {"app": ...}`` in ``langgraph.json``) runs in the
server's process. The server wraps every request to it in its ``EnsureStoreAccessible`` middleware
(``langgraph_api.middleware.ensure_store``), which puts the server's store where
``langgraph.config.get_store()`` finds it: the supported way, inside a request to the app's routes.
Middleware of the app runs outside that wrapper: there ``langgraph_api.store.get_store()`` (what
the wrapper itself calls) gives the same store, once the server has loaded its runtime
(``langgraph_runtime``). Where neither answers, the server's store API through its SDK client in
process (`ClientStore`). Nothing is touched before a request asks for it, so the app never reaches
for a store the runtime has not set up yet. Outside a server: pass the store (or a client).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from langgraph.store.base import BaseStore

from langmem_paging.ops.snapshots import Snapshot, latest_branch, snapshot_of_state
from langmem_paging.server.client_store import ClientStore

__all__ = ["reach_store", "server_client", "server_snapshots"]

_HISTORY_PAGE = 100


async def reach_store(given: BaseStore | None = None, client: Any = None) -> tuple[BaseStore | None, str]:
    """The store to work on, and how it was reached: `given` (``"given"``); else, in a LangGraph
    server, its store (``"langgraph.config.get_store"`` inside a request to the app's routes,
    ``"langgraph_api.store.get_store"`` in the app's middleware); else its store API through `client`
    or the server's own SDK client (``"store API"``, a `ClientStore`); else ``(None, "unreachable")``."""
    if given is not None:
        return given, "given"
    try:
        from langgraph.config import get_store

        store = get_store()
    except RuntimeError:  # not inside the server's request context (or outside a server)
        store = None
    if isinstance(store, BaseStore):
        return store, "langgraph.config.get_store"
    if "langgraph_runtime" in sys.modules:  # in a server's process (never import its package here)
        try:
            from langgraph_api.store import get_store as server_store
        except ImportError:  # moved (the test of this module says so): the store API still answers
            pass
        else:
            return await server_store(), "langgraph_api.store.get_store"
    client = server_client(client)
    if client is None:
        return None, "unreachable"
    return ClientStore(client, loop=asyncio.get_running_loop()), "store API"


def server_client(given: Any = None) -> Any:
    """`given`, else the server's SDK client in process (``langgraph_sdk.get_client()``: requests go
    to the server's own app, not over the network) when in a server's process, else None."""
    if given is not None:
        return given
    if "langgraph_runtime" not in sys.modules:
        return None
    from langgraph_sdk import get_client

    return get_client()


async def server_snapshots(client: Any, thread_id: str) -> list[Snapshot]:
    """A thread's checkpoints on its latest branch, oldest first, through the server's thread
    history API (``client.threads.get_history``, paged); [] for a thread the server does not know."""
    from langgraph_sdk.errors import NotFoundError

    states: list[dict[str, Any]] = []
    before = None
    while True:
        try:
            batch = await client.threads.get_history(thread_id, limit=_HISTORY_PAGE, before=before)
        except NotFoundError:
            return []
        states += batch
        if len(batch) < _HISTORY_PAGE:
            return latest_branch(snapshot_of_state(s) for s in states)
        before = batch[-1]["checkpoint"]
