"""Typed requests: every request is answered by its own handler on both drivers, flows get the
answer back (or the error, which they may handle), and a search reads the same on both sides."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.memory import InMemoryStore

from langmem_paging.core import effects
from langmem_paging.core.effects import Request, arun, ask, run
from langmem_paging.core.errors import SearchIndexError
from langmem_paging.core.records import Page
from langmem_paging.core.state import PagingState
from langmem_paging.index.base import Hit, InMemoryBM25Index
from langmem_paging.recall import io as recall_io
from langmem_paging.recall.io import RecallIO, Search
from langmem_paging.runtime import thread_io
from langmem_paging.runtime.thread_io import PagingIO, ThreadFlow, ThreadIO
from langmem_paging.step import io as step_io
from langmem_paging.step.io import StepIO
from langmem_paging.storage.page_store import PageStore

HANDLERS: dict[type[Request[Any, Any]], str] = {
    step_io.Reserve: "reserve",
    step_io.LoadPages: "load_pages",
    step_io.LoadSketch: "load_sketch",
    step_io.LoadTerms: "load_terms",
    step_io.MakeBookmarks: "make_bookmarks",
    step_io.ComputeFeatures: "compute_features",
    step_io.MakeDigests: "make_digests",
    thread_io.Commit: "commit",
    thread_io.IndexPages: "index_pages",
    recall_io.Search: "search",
    recall_io.ScoreTexts: "score_texts",
    recall_io.LoadClusters: "load_clusters",
    recall_io.ListMembers: "list_members",
    thread_io.ReadLifecycle: "read_lifecycle",
    recall_io.Notify: "notify",
    thread_io.Trace: "trace",
}
"""Each public request and the protocol handler that answers it."""


def _public_requests() -> set[type]:
    found, todo = set(), list(Request.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__ in (
            effects.__name__,
            step_io.__name__,
            recall_io.__name__,
            thread_io.__name__,
        ) and not cls.__name__.startswith("_"):
            found.add(cls)
    return found


def _handler_names(protocol: type) -> set[str]:
    return {
        name
        for name, member in vars(protocol).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def _instance(cls: type[Request[Any, Any]]) -> Request[Any, Any]:
    """A request of `cls` with placeholder fields: the drivers only route it."""
    return cls(**{f.name: f"{f.name}-value" for f in dataclasses.fields(cls)})  # type: ignore[arg-type]


class RecordingIO:
    """Answers every handler with a value naming it, recording which handler ran on which request."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Request[Any, Any]]] = []

    def __getattr__(self, name: str) -> Callable[[Request[Any, Any]], Any]:
        def sync(request: Request[Any, Any]) -> str:
            self.calls.append((name, request))
            return f"answer of {name}"

        async def asynchronous(request: Request[Any, Any]) -> str:
            return sync(request)

        return asynchronous if name.startswith("a") and name[1:] in HANDLERS.values() else sync


def test_the_table_names_every_request_and_every_handler_of_the_protocol():
    assert set(HANDLERS) == _public_requests()
    handlers = set(HANDLERS.values())
    assert _handler_names(StepIO) | _handler_names(RecallIO) | _handler_names(PagingIO) == handlers | {
        f"a{h}" for h in handlers
    }


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("cls", list(HANDLERS), ids=lambda cls: cls.__name__)
def test_each_request_is_answered_by_its_own_handler(cls, mode):
    request = _instance(cls)

    def flow() -> ThreadFlow[object]:
        return (yield from ask(request))

    io = RecordingIO()
    answer = run(flow(), io) if mode == "sync" else asyncio.run(arun(flow(), io))
    handler = HANDLERS[cls] if mode == "sync" else f"a{HANDLERS[cls]}"
    assert io.calls == [(handler, request)]
    assert answer == f"answer of {handler}"


class FailingSearchIO:
    """Search fails as a broken index does; numbers come from the state, as with no store."""

    def search(self, request: Search) -> list[Hit]:
        raise SearchIndexError("the search index failed: locked")

    async def asearch(self, request: Search) -> list[Hit]:
        return self.search(request)

    def reserve(self, request: step_io.Reserve) -> list[int]:
        return request.state.allocate(request.kind, len(request.digests))

    async def areserve(self, request: step_io.Reserve) -> list[int]:
        return self.reserve(request)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_flow_gets_typed_answers_and_handles_the_errors_thrown_into_it(mode):
    def flow() -> ThreadFlow[tuple[list[Hit], list[int]]]:
        try:
            hits = yield from ask(Search("bees", 5, lambda pid: True))
        except SearchIndexError:
            hits = []  # as the engine does with `on_store_error="continue"`
        numbers = yield from ask(step_io.Reserve("p", ["d1", "d2"], PagingState()))
        return hits, numbers

    io = FailingSearchIO()
    hits, numbers = run(flow(), io) if mode == "sync" else asyncio.run(arun(flow(), io))
    assert (hits, numbers) == ([], [1, 2])


class RecordingIndex(InMemoryBM25Index):
    """Records the index calls of a search; the async side runs these same methods in a worker thread."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def indexed_through(self, thread_id: str) -> int | None:
        self.calls.append("indexed_through")
        return super().indexed_through(thread_id)

    def load(self, thread_id: str, pages: Iterable[Page]) -> None:
        self.calls.append(
            f"load {type(pages).__name__}"
        )  # a list: the store was read before the index is written
        super().load(thread_id, pages)

    def search(self, thread_id: str, query: str, *, limit: int, allow: Callable[[str], bool]) -> list[Hit]:
        self.calls.append("search")
        return super().search(thread_id, query, limit=limit, allow=allow)


def _stored_thread(store: PageStore, thread_id: str) -> None:
    state = PagingState()
    numbers = state.allocate("p", 2)
    pages = [
        Page(
            id=f"p{n}",
            messages=[HumanMessage(text, id=f"m{n}"), AIMessage("Noted.", id=f"a{n}")],
            bookmark=f"[p{n}:x]",
            keywords=[],
            token_count=9,
            boundary="fixed_2",
            created_turn=n,
        )
        for n, text in zip(
            numbers, ["Our beehives stand near Lake Bled.", "The marathon is in May."], strict=True
        )
    ]
    store.commit(thread_id, pages=pages, nodes=[], state=state)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_cold_search_reads_the_same_on_both_sides(mode):
    """One flow of reads: both sides read every page first, then load, then search (the sync side
    used to hand the index the store's lazy scan, read while the index loaded)."""
    page_store = PageStore(InMemoryStore())
    _stored_thread(page_store, "t")
    index = RecordingIndex()
    io = ThreadIO(page_store, index, "t")
    request = Search("beehives", 5, lambda pid: True)
    hits = io.search(request) if mode == "sync" else asyncio.run(io.asearch(request))
    assert [hit.page_id for hit in hits] == ["p1"]
    assert index.calls == ["indexed_through", "load list", "search"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_claims_on_postgres_read_and_write_the_same_on_both_sides(postgres_uri, mode):
    """Postgres claims are one generator of statements run on a sync or an async cursor: deleting a
    thread before anything was claimed creates no table on either side (the async side used to
    create it, the sync side looked first), and a claim after it creates it on both."""
    import psycopg
    from langgraph.store.postgres import PostgresStore
    from langgraph.store.postgres.aio import AsyncPostgresStore

    from langmem_paging.storage.claims import TABLE, claims_for
    from tests.support.postgres_server import fresh_database

    uri = fresh_database(postgres_uri, f"langmem_claims_{mode}")

    def table_exists() -> bool:
        with psycopg.connect(uri) as conn:
            return bool(conn.execute("SELECT to_regclass(%s) IS NOT NULL", (TABLE,)).fetchone()[0])

    async def on_async_store() -> list[bool]:
        async with AsyncPostgresStore.from_conn_string(uri) as store:
            await store.setup()
            claims = claims_for(store)
            await claims.adrop("t")
            dropped_created = table_exists()
            return [dropped_created, *(await claims.aclaim("t", "p", [1], ["a"]))]

    if mode == "sync":
        with PostgresStore.from_conn_string(uri) as store:
            store.setup()
            claims = claims_for(store)
            claims.drop("t")
            seen = [table_exists(), *claims.claim("t", "p", [1], ["a"])]
    else:
        seen = asyncio.run(on_async_store())
    assert seen == [False, True]
    assert table_exists()
