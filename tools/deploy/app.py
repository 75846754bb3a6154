"""A plain multi-process app over one Postgres (no LangGraph server): ``uvicorn --workers N
tools.deploy.app:app``; ``POST /turn {"graph", "thread", "id", "text"}`` runs one turn.

Each run holds its thread's advisory lock (`thread_lock`) unless ``$DEPLOY_APP_LOCK`` is ``0``:
without it, two workers running one thread at once lose turns (the last write wins). A retried
request (``"retry": true``) whose message the thread already holds paged out (the first attempt
landed before its worker died, and another client's turn paged it since) is not sent again: its id
would no longer replace anything, and the thread would hold the message twice.
``$LANGMEM_PAGING_STORE`` names the database (store and checkpointer both)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from typing import Any

from langchain_core.messages import HumanMessage
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from graphs import postgres_persistence
from graphs.deploy_graph import build
from tools.deploy.thread_lock import thread_lock

LOCK_ENV = "DEPLOY_APP_LOCK"


@contextlib.asynccontextmanager
async def lifespan(app: Starlette) -> AsyncIterator[None]:
    async with postgres_persistence.store() as store, postgres_persistence.checkpointer() as saver:
        app.state.graphs = {
            name: build(name == "paging", store=store, checkpointer=saver) for name in ("paging", "plain")
        }
        yield


async def turn(request: Request) -> JSONResponse:
    body = await request.json()
    graph = request.app.state.graphs[body["graph"]]
    config = {"configurable": {"thread_id": body["thread"]}}
    locked = os.environ.get(LOCK_ENV, "1") != "0"
    uri = postgres_persistence.uri()
    async with thread_lock(uri, body["thread"]) if locked else contextlib.nullcontext():
        if not (body.get("retry") and await _holds(graph, config, body["id"])):
            await graph.ainvoke({"messages": [HumanMessage(body["text"], id=body["id"])]}, config)
    return JSONResponse({"ok": True, "pid": os.getpid()})


async def _holds(graph: Any, config: dict[str, Any], message_id: str) -> bool:
    """Whether the thread holds the message paged out already (its turn done, and a later turn paged
    it). One still in the state runs again: the same id replaces it in place."""
    paging = getattr(graph, "paging", None)
    if paging is None:
        return False
    pages = await paging.page_store.alist_pages(config["configurable"]["thread_id"])
    return any(m.id == message_id for page in pages for m in page.messages)


async def ok(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


app = Starlette(routes=[Route("/turn", turn, methods=["POST"]), Route("/ok", ok)], lifespan=lifespan)
