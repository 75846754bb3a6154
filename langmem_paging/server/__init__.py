"""The LangGraph server (Agent Server) app: the paging routes, and pages deleted with their threads.

Serve it from ``langgraph.json``, or build your own with `paging_app`::

    {"http": {"app": "langmem_paging.server:app"}}            # in langgraph.json

    from langmem_paging.server import paging_app               # your own app, your own store
    app = paging_app(store=store, checkpointer=checkpointer)

The app touches the store only inside a request to its own routes (`routes.PagingRoutes`, under
``/paging``) and after the server has deleted threads (`DeletePagesWithThreads`): every other request
passes through untouched. `reach` is the one place that knows how a custom app reaches the server's
store. Needs Starlette, the ``server`` extra (``pip install "langmem-paging[server]"``; the server
brings it).
"""

from __future__ import annotations

try:
    import starlette  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised with starlette hidden
    raise ImportError(
        'langmem_paging.server needs Starlette: pip install "langmem-paging[server]"'
    ) from error

from typing import Any

from langgraph.store.base import BaseStore
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import Receive, Scope, Send

from langmem_paging.server.client_store import ClientStore
from langmem_paging.server.deletion import DeletePagesWithThreads, adelete_thread_pages
from langmem_paging.server.reach import reach_store
from langmem_paging.server.routes import MAX_ID, PREFIX, PagingRoutes

__all__ = [
    "MAX_ID",
    "ClientStore",
    "PREFIX",
    "DeletePagesWithThreads",
    "PagingRoutes",
    "adelete_thread_pages",
    "app",
    "paging_app",
    "reach_store",
]


class _PagingApp(Starlette):
    """Starlette, with the lifespan sent straight to the router, past every middleware.

    The server makes this app its own and adds its middleware to it, among them
    ``EnsureStoreAccessible``, which reads the runtime's store on every call, a lifespan's too: under
    ``langgraph-runtime-pg`` (0.11.1.post1, langgraph-api 0.11.1) that read raises before the lifespan
    has set the store up, so the lifespan failed, the database pool never started, and every request
    answered 500 (``Store requires setup_store()/start_pool() first``). Middleware has nothing to do
    with a lifespan (Starlette's own passes it through)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            scope["app"] = self
            await self.router(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


def paging_app(
    store: BaseStore | None = None, *, checkpointer: Any = None, client: Any = None, prefix: str = PREFIX
) -> Starlette:
    """A Starlette app with the paging routes under `prefix` and `DeletePagesWithThreads`.

    Args:
        store: The store the agent pages into; default the LangGraph server's (reached per request).
        checkpointer: Where ``verify`` reads checkpoints; default the server's thread history.
        client: A `langgraph_sdk` async client; default the server's, in process.
        prefix: Where the routes live (default ``/paging``).
    """
    routes = PagingRoutes(store, checkpointer=checkpointer, client=client, prefix=prefix)
    deletion = Middleware(DeletePagesWithThreads, store=store, client=client)
    return _PagingApp(routes=routes.routes(), middleware=[deletion])


app = paging_app()
"""The app for ``langgraph.json`` (``"http": {"app": "langmem_paging.server:app"}``); building it
touches nothing."""
