"""The paging routes: readiness, and forget, delete, verify and export of one thread, over HTTP.

Every route answers JSON. A bad thread or message id (empty, over `MAX_ID` characters, control
characters) is refused with 400 before anything is read; an unknown thread or message with 404 (a
thread is known by its store records, and for forget by its latest checkpoint too);
a store that cannot be reached or fails with 503; nothing else is touched on an error. The work is
the library's: `PageStore.aforget` / `adelete_thread` (the page lifecycle's entry point),
`ops.verify_thread`, `ops.export_records`, `ops.acheck_ready`.
"""

from __future__ import annotations

import asyncio
import json
import unicodedata
from collections.abc import Awaitable, Callable
from typing import Any

from langgraph.store.base import BaseStore, SearchOp
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from langmem_paging.core.errors import StorageError
from langmem_paging.ops.portable import export_records, without_ttl_refresh
from langmem_paging.ops.readiness import acheck_ready
from langmem_paging.ops.snapshots import Snapshot, latest_branch, load_snapshots
from langmem_paging.ops.verification import CannotVerify, verify_thread
from langmem_paging.server.reach import reach_store, server_client, server_snapshots
from langmem_paging.storage.page_store import NAMESPACE_ROOT, PageStore, abatch_any

__all__ = ["MAX_ID", "PREFIX", "PagingRoutes"]

PREFIX = "/paging"
MAX_ID = 256
"""The longest thread or message id the routes accept, in characters."""

Endpoint = Callable[[Request], Awaitable[JSONResponse]]


class _Refused(Exception):
    """A request answered with an error status: ``{"error": code, "detail": ...}``."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.code, self.detail = status, code, detail


class PagingRoutes:
    """The routes, over a store and (for verify) a checkpointer; both default to the LangGraph
    server's, reached per request (`reach`).

    Args:
        store: The store the agent pages into; default the server's.
        checkpointer: Where verify reads the thread's checkpoints; default the server's thread
            history (in process).
        client: A `langgraph_sdk` async client for that history; default the server's, in process.
        prefix: Where the routes live.
    """

    def __init__(
        self,
        store: BaseStore | None = None,
        *,
        checkpointer: Any = None,
        client: Any = None,
        prefix: str = PREFIX,
    ) -> None:
        self.store, self.checkpointer, self.client, self.prefix = store, checkpointer, client, prefix

    def routes(self) -> list[Route]:
        """The Starlette routes."""
        thread = f"{self.prefix}/threads/{{thread_id}}"
        table: list[tuple[str, Endpoint, str]] = [
            (f"{self.prefix}/ready", self.ready, "GET"),
            (f"{thread}/forget", self.forget, "POST"),
            (f"{thread}/messages/{{message_id}}", self.forget_message, "DELETE"),
            (f"{thread}/pages", self.delete_pages, "DELETE"),
            (f"{thread}/verify", self.verify, "GET"),
            (f"{thread}/export", self.export, "GET"),
        ]
        return [Route(path, _answered(endpoint), methods=[method]) for path, endpoint, method in table]

    # -- the endpoints: each answers JSON or raises _Refused (answered by `_answered`) ------------
    async def ready(self, request: Request) -> JSONResponse:
        """``GET /paging/ready``: 200 when the store, its index and its claims answer, else 503."""
        store, how = await reach_store(self.store, self.client)
        if store is None:
            raise _Refused(503, "store_unreachable", _UNREACHABLE)
        readiness = await acheck_ready(store)
        return JSONResponse({**readiness.to_dict(), "store_from": how}, 200 if readiness.ready else 503)

    async def forget(self, request: Request) -> JSONResponse:
        """``POST .../forget`` with ``{"message_id": ...}``."""
        thread_id = _id(request.path_params["thread_id"], "thread id")
        message_id = _id(await _body_field(request, "message_id"), "message id")
        return await self._forget(thread_id, message_id)

    async def forget_message(self, request: Request) -> JSONResponse:
        """``DELETE .../messages/{message_id}``: the same as ``forget``."""
        thread_id = _id(request.path_params["thread_id"], "thread id")
        message_id = _id(request.path_params["message_id"], "message id")
        return await self._forget(thread_id, message_id)

    async def _forget(self, thread_id: str, message_id: str) -> JSONResponse:
        """A message a page holds, or one of the thread's latest checkpoint (still in the context, on a
        thread with no page yet too: the lifecycle record names it and the next step tombstones it in
        the state). 404 ``unknown_thread`` when the store holds no record of the thread and no checkpoint
        of it can be read; ``unknown_message`` when neither holds the message."""
        store = await self._store()
        pages = PageStore(store)
        if not await _paged(pages, thread_id, message_id):
            latest = await self._latest_ids(thread_id)
            if latest is None and not await _has_records(store, thread_id):
                raise _unknown_thread(thread_id)
            if message_id not in (latest or ()):
                raise _Refused(
                    404,
                    "unknown_message",
                    f"no page of thread {thread_id!r} and no message of its latest checkpoint is {message_id!r}",
                )
        changed = await pages.aforget(thread_id, message_id)
        return JSONResponse({"thread_id": thread_id, "message_id": message_id, "pages": changed})

    async def _latest_ids(self, thread_id: str) -> set[str | None] | None:
        """The message ids of the thread's latest checkpoint; None where it has none or no checkpoints
        can be read."""
        try:
            snapshots = await self._snapshots(thread_id)
        except _Refused:
            return None
        latest = latest_branch(snapshots)
        return {m.id for m in latest[-1].messages} if latest else None

    async def delete_pages(self, request: Request) -> JSONResponse:
        """``DELETE .../pages``: every record, index row and claim of the thread."""
        thread_id = _id(request.path_params["thread_id"], "thread id")
        store = await self._known_thread(thread_id)
        deleted = await PageStore(store).adelete_thread(thread_id)
        return JSONResponse({"thread_id": thread_id, "deleted": deleted})

    async def export(self, request: Request) -> JSONResponse:
        """``GET .../export``: the thread's store records (``langmem-paging export``'s)."""
        thread_id = _id(request.path_params["thread_id"], "thread id")
        store = await self._known_thread(thread_id)
        records = await asyncio.to_thread(export_records, without_ttl_refresh(store), thread_id)
        return JSONResponse({"thread_id": thread_id, "records": records})

    async def verify(self, request: Request) -> JSONResponse:
        """``GET .../verify``: the lossless check (``langmem-paging verify --json``'s report)."""
        thread_id = _id(request.path_params["thread_id"], "thread id")
        store = await self._store()
        snapshots = await self._snapshots(thread_id)
        pages = PageStore(without_ttl_refresh(store))
        try:
            result = await asyncio.to_thread(verify_thread, pages, thread_id, snapshots)
        except CannotVerify as error:
            if not await _has_records(store, thread_id):
                raise _unknown_thread(thread_id) from error
            raise _Refused(409, "no_checkpoints", str(error)) from error
        return JSONResponse(result.to_dict())

    # -- shared ----------------------------------------------------------------------------------
    async def _store(self) -> BaseStore:
        store, _ = await reach_store(self.store, self.client)
        if store is None:
            raise _Refused(503, "store_unreachable", _UNREACHABLE)
        return store

    async def _known_thread(self, thread_id: str) -> BaseStore:
        store = await self._store()
        if not await _has_records(store, thread_id):
            raise _unknown_thread(thread_id)
        return store

    async def _snapshots(self, thread_id: str) -> list[Snapshot]:
        if self.checkpointer is not None:
            return await asyncio.to_thread(load_snapshots, self.checkpointer, thread_id)
        client = server_client(self.client)
        if client is None:
            raise _Refused(
                503,
                "checkpoints_unreachable",
                "verify reads the thread's checkpoints: pass checkpointer= to paging_app "
                "(or run the app inside a LangGraph server)",
            )
        return await server_snapshots(client, thread_id)


async def _paged(pages: PageStore, thread_id: str, message_id: str) -> bool:
    async for page in pages.ascan(thread_id):
        if any(m.id == message_id for m in page.messages):
            return True
    return False


_UNREACHABLE = (
    "no store to work on: run the app inside a LangGraph server (langgraph.json "
    '"http": {"app": "langmem_paging.server:app"}), or pass store= to paging_app'
)


def _answered(endpoint: Endpoint) -> Endpoint:
    """The endpoint, with its refusals and store failures answered as JSON (never a 500 page)."""

    async def run(request: Request) -> JSONResponse:
        try:
            return await endpoint(request)
        except _Refused as refused:
            return JSONResponse({"error": refused.code, "detail": refused.detail}, refused.status)
        except StorageError as error:
            return JSONResponse({"error": "store_failed", "detail": str(error)}, 503)

    return run


def _id(value: Any, what: str) -> str:
    """A thread or message id as the routes accept it, or a 400."""
    if not isinstance(value, str) or not value:
        raise _Refused(400, "bad_id", f"the {what} is empty (or not a string)")
    if len(value) > MAX_ID:
        raise _Refused(400, "bad_id", f"the {what} has {len(value)} characters; at most {MAX_ID}")
    if any(unicodedata.category(c) in ("Cc", "Cs") for c in value):
        raise _Refused(400, "bad_id", f"the {what} {value!r} holds control characters")
    return value


async def _body_field(request: Request, name: str) -> Any:
    try:
        body = json.loads(await request.body() or b"null")
    except ValueError as error:
        raise _Refused(400, "bad_body", f"the body is not JSON ({error})") from error
    if not isinstance(body, dict) or name not in body:
        raise _Refused(400, "bad_body", f'the body must be a JSON object with "{name}"')
    return body[name]


async def _has_records(store: BaseStore, thread_id: str) -> bool:
    """One read: does the store hold any record of the thread."""
    probe = SearchOp((NAMESPACE_ROOT, thread_id), limit=1, refresh_ttl=False)
    try:
        (found,) = await abatch_any(store, [probe])
    except Exception as error:  # noqa: BLE001 - a store that fails (not set up, down) answers 503
        raise _Refused(503, "store_failed", f"{type(error).__name__}: {error}") from error
    return bool(found)


def _unknown_thread(thread_id: str) -> _Refused:
    return _Refused(404, "unknown_thread", f"no such thread {thread_id!r}: the store holds no page of it")
