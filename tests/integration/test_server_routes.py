"""`langmem_paging.server`'s routes over the ASGI app (httpx's ASGITransport) with a real store and
checkpointer: forget, delete, verify, export, readiness; bad input answered 4xx with nothing touched;
the deletion middleware going through the page lifecycle (index rows too); a store that is not set up
breaks only the paging routes (503), never another request.
"""

from __future__ import annotations

import importlib
import sqlite3
import sys
from urllib.parse import quote

import httpx
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from langmem_paging import PageStore
from langmem_paging.index.defaults import default_index
from langmem_paging.ops import export_records, where_text
from langmem_paging.server import MAX_ID, DeletePagesWithThreads, paging_app
from tests.support.ops_thread import run_thread

THREAD = "routes-thread"


@pytest.fixture
def paged():
    """An in-memory store and checkpointer holding one paged thread (and another thread)."""
    store, saver = InMemoryStore(), InMemorySaver()
    run_thread(store, saver, THREAD, turns=14)
    run_thread(store, saver, "other-thread", turns=14)
    return store, saver


def client_of(app) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://paging.test")


def everything(store) -> list[tuple]:
    """Every record of the store, to show a refused request touched nothing."""
    items = store.search(("langmem_paging",), limit=100_000)
    return sorted((tuple(i.namespace), i.key, repr(i.value)) for i in items)


def paged_message_id(store, thread_id: str = THREAD) -> tuple[str, str]:
    """A user message stored in a page: its id and text."""
    page = PageStore(store).list_pages(thread_id)[0]
    message = next(m for m in page.messages if isinstance(m, HumanMessage))
    return message.id, str(message.content)


@pytest.mark.parametrize("how", ["post", "delete"])
async def test_forgetting_a_message_over_http_scrubs_its_pages_and_the_index(paged, how):
    store, saver = paged
    message_id, text = paged_message_id(store)
    index = default_index(store)
    pages = PageStore(store)
    await index.aload(THREAD, pages.list_pages(THREAD))
    word = "Zarko0"
    assert word in text and index.search(THREAD, word, limit=5, allow=lambda _: True)
    other_before = export_records(store, "other-thread")

    async with client_of(paging_app(store, checkpointer=saver)) as client:
        if how == "post":
            answer = await client.post(f"/paging/threads/{THREAD}/forget", json={"message_id": message_id})
        else:
            answer = await client.delete(f"/paging/threads/{THREAD}/messages/{message_id}")

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["thread_id"] == THREAD and body["message_id"] == message_id and body["pages"]
    stored = [m for p in pages.list_pages(THREAD) for m in p.messages if m.id == message_id]
    assert [m.content for m in stored] == ["[forgotten]"]
    assert not index.search(THREAD, word, limit=5, allow=lambda _: True)
    assert not [p for p in where_text(pages, THREAD, word) if p.place.startswith(("page", "index", "store"))]
    assert export_records(store, "other-thread") == other_before


async def test_deleting_a_threads_pages_over_http_drops_records_index_rows_and_only_that_thread(paged):
    store, saver = paged
    index = default_index(store)
    await index.aload(THREAD, PageStore(store).list_pages(THREAD))
    other_before = export_records(store, "other-thread")

    async with client_of(paging_app(store, checkpointer=saver)) as client:
        answer = await client.delete(f"/paging/threads/{THREAD}/pages")
        again = await client.delete(f"/paging/threads/{THREAD}/pages")

    assert answer.status_code == 200, answer.text
    assert answer.json()["deleted"] > 0
    assert export_records(store, THREAD) == [] and not index.has(THREAD)
    assert again.status_code == 404 and again.json()["error"] == "unknown_thread"
    assert export_records(store, "other-thread") == other_before


async def test_export_and_verify_over_http_answer_what_the_operator_tools_answer(paged):
    store, saver = paged
    async with client_of(paging_app(store, checkpointer=saver)) as client:
        exported = await client.get(f"/paging/threads/{THREAD}/export")
        verified = await client.get(f"/paging/threads/{THREAD}/verify")

    assert exported.status_code == 200
    assert exported.json() == {"thread_id": THREAD, "records": export_records(store, THREAD)}
    assert verified.status_code == 200, verified.text
    report = verified.json()
    assert report["lossless"] is True and report["issues"] == [] and report["pages_used"] > 0


async def test_verify_without_checkpoints_says_where_to_get_them(paged):
    store, _ = paged
    async with client_of(paging_app(store)) as client:
        answer = await client.get(f"/paging/threads/{THREAD}/verify")
    assert answer.status_code == 503
    assert "checkpointer=" in answer.json()["detail"]


BAD_IDS = [
    ("x" * (MAX_ID + 1), "characters; at most"),
    ("a\x00b", "control characters"),
    ("line\nbreak", "control characters"),
    ("esc\x1b[0m", "control characters"),
]


def requests_for(thread_id: str, message_id: str) -> list[tuple[str, str, dict | None]]:
    thread, message = f"/paging/threads/{quote(thread_id, safe='')}", quote(message_id, safe="")
    return [
        ("POST", f"{thread}/forget", {"message_id": message_id}),
        ("DELETE", f"{thread}/messages/{message}", None),
        ("DELETE", f"{thread}/pages", None),
        ("GET", f"{thread}/verify", None),
        ("GET", f"{thread}/export", None),
    ]


@pytest.mark.parametrize(("bad", "says"), BAD_IDS)
async def test_a_malformed_thread_id_is_refused_with_400_and_nothing_touched(paged, bad, says):
    store, saver = paged
    before = everything(store)
    async with client_of(paging_app(store, checkpointer=saver)) as client:
        for method, path, body in requests_for(bad, "m1"):
            answer = await client.request(method, path, json=body)
            assert answer.status_code == 400, (method, path, answer.text)
            assert answer.json()["error"] == "bad_id" and says in answer.json()["detail"]
    assert everything(store) == before


@pytest.mark.parametrize(("bad", "says"), [*BAD_IDS, ("", "empty")])
async def test_a_malformed_message_id_is_refused_with_400_and_nothing_touched(paged, bad, says):
    store, saver = paged
    before = everything(store)
    async with client_of(paging_app(store, checkpointer=saver)) as client:
        answers = [await client.post(f"/paging/threads/{THREAD}/forget", json={"message_id": bad})]
        if bad:  # an empty path segment matches no route
            answers.append(await client.delete(f"/paging/threads/{THREAD}/messages/{quote(bad, safe='')}"))
    for answer in answers:
        assert answer.status_code == 400, answer.text
        assert says in answer.json()["detail"]
    assert everything(store) == before


@pytest.mark.parametrize(
    "body", [b"not json", b"[1, 2]", b"{}", b'{"message_id": 7}', b'{"message_id": null}']
)
async def test_a_malformed_forget_body_is_refused_with_400(paged, body):
    store, saver = paged
    before = everything(store)
    async with client_of(paging_app(store, checkpointer=saver)) as client:
        answer = await client.post(f"/paging/threads/{THREAD}/forget", content=body)
    assert answer.status_code == 400 and answer.json()["error"] in ("bad_body", "bad_id")
    assert everything(store) == before


async def test_unknown_threads_and_messages_are_404_and_nothing_touched(paged):
    store, saver = paged
    before = everything(store)
    async with client_of(paging_app(store, checkpointer=saver)) as client:
        for method, path, body in requests_for("no-such-thread", "m1"):
            answer = await client.request(method, path, json=body)
            assert answer.status_code == 404, (method, path, answer.text)
            assert answer.json()["error"] == "unknown_thread"
        for answer in [
            await client.post(f"/paging/threads/{THREAD}/forget", json={"message_id": "no-such-message"}),
            await client.delete(f"/paging/threads/{THREAD}/messages/no-such-message"),
        ]:
            assert answer.status_code == 404 and answer.json()["error"] == "unknown_message"
    assert everything(store) == before


async def test_ready_on_a_memory_store():
    async with client_of(paging_app(InMemoryStore())) as client:
        answer = await client.get("/paging/ready")
    assert answer.status_code == 200
    body = answer.json()
    assert body["ready"] is True and body["missing"] == [] and body["store_from"] == "given"
    assert {name: check["kind"] for name, check in body["checks"].items()} == {
        "store": "InMemoryStore",
        "index": "InMemoryBM25Index",
        "claims": "InProcessClaims",
    }


async def test_ready_on_sqlite_and_503_naming_what_is_missing_where_tables_cannot_be_made(tmp_path):
    """A SqliteStore makes its tables on first use: they are missing only where it cannot (a read-only
    database, as under a user without write access)."""
    from langgraph.store.sqlite import SqliteStore

    path = tmp_path / "ready.sqlite"
    sqlite3.connect(path).close()  # an empty database file
    read_only = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    writable = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        async with client_of(paging_app(SqliteStore(read_only))) as client:
            missing = await client.get("/paging/ready")
        async with client_of(paging_app(SqliteStore(writable))) as client:
            ready = await client.get("/paging/ready")
    finally:
        read_only.close()
        writable.close()
    assert missing.status_code == 503
    assert "store" in missing.json()["missing"]
    assert "readonly database" in missing.json()["checks"]["store"]["detail"]
    assert ready.status_code == 200, ready.text
    kinds = {name: check["kind"] for name, check in ready.json()["checks"].items()}
    assert kinds == {"store": "SqliteStore", "index": "SqliteSearchIndex", "claims": "SqliteClaims"}


async def test_ready_on_postgres_and_503_naming_the_store_before_its_setup(postgres_uri):
    from langgraph.store.postgres import PostgresStore

    from tests.support.postgres_server import fresh_database

    uri = fresh_database(postgres_uri, "server_ready")
    with PostgresStore.from_conn_string(uri) as store:
        async with client_of(paging_app(store)) as client:
            missing = await client.get("/paging/ready")
            store.setup()
            ready = await client.get("/paging/ready")
    assert missing.status_code == 503
    assert "store" in missing.json()["missing"]
    assert 'relation "store" does not exist' in missing.json()["checks"]["store"]["detail"]
    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"]["claims"]["kind"] == "PostgresClaims"


class NotSetUpStore(InMemoryStore):
    """A store as a server runtime's is before its setup: every operation fails."""

    def batch(self, ops):
        raise RuntimeError("Store requires setup_store()/start_pool() first")

    async def abatch(self, ops):
        raise RuntimeError("Store requires setup_store()/start_pool() first")


async def test_a_store_not_set_up_breaks_only_the_paging_routes():
    async def hello(request):
        return JSONResponse({"hello": "world"})

    store = NotSetUpStore()
    app = paging_app(store)
    app.router.routes.append(Route("/hello", hello))  # an ordinary route of the server, beside ours
    async with client_of(app) as client:
        ordinary = await client.get("/hello")
        ready = await client.get("/paging/ready")
        forget = await client.post(f"/paging/threads/{THREAD}/forget", json={"message_id": "m1"})
        export = await client.get(f"/paging/threads/{THREAD}/export")
    assert ordinary.status_code == 200 and ordinary.json() == {"hello": "world"}
    assert ready.status_code == 503 and "setup_store" in ready.json()["checks"]["store"]["detail"]
    for answer in (forget, export):
        assert answer.status_code == 503 and answer.json()["error"] == "store_failed"
        assert "setup_store" in answer.json()["detail"]


def test_the_servers_lifespan_starts_though_its_middleware_reads_a_store_the_lifespan_sets_up():
    """As the Agent Server installs the app on langgraph-runtime-pg: its lifespan (which sets the store
    up) merged into the app's, and its middleware, which reads that store on every call, added to the
    app's. Before: the lifespan went through that middleware, failed, and every request answered 500."""
    from contextlib import asynccontextmanager

    from starlette.middleware import Middleware
    from starlette.testclient import TestClient

    runtime: dict[str, object] = {}

    class EnsureStore:  # the server's EnsureStoreAccessible: the runtime's store, on every call
        def __init__(self, app):
            self.app = app

        async def __call__(self, scope, receive, send):
            if "store" not in runtime:
                raise RuntimeError("Store requires setup_store()/start_pool() first")
            await self.app(scope, receive, send)

    @asynccontextmanager
    async def lifespan(app):
        runtime["store"] = InMemoryStore()
        yield

    app = paging_app(InMemoryStore())
    app.user_middleware += [Middleware(EnsureStore)]
    app.router.lifespan_context = lifespan
    app.router.routes.append(Route("/ok", lambda request: JSONResponse({"ok": True})))
    with TestClient(app) as client:
        assert client.get("/ok").status_code == 200
        assert client.get("/paging/ready").status_code == 200


async def test_without_a_store_or_a_server_the_routes_say_how_to_give_one():
    async with client_of(paging_app()) as client:
        answer = await client.get("/paging/ready")
    assert answer.status_code == 503 and answer.json()["error"] == "store_unreachable"
    assert "store=" in answer.json()["detail"]


def _server_answering(status: int):
    async def delete_thread(request):
        return JSONResponse({}, status)

    return Starlette(
        routes=[Route("/threads/{thread_id}", delete_thread, methods=["DELETE"])],
    )


@pytest.mark.parametrize(("status", "gone"), [(204, True), (404, False)])
async def test_the_deletion_middleware_deletes_through_the_lifecycle_index_rows_too(paged, status, gone):
    store, _ = paged
    index = default_index(store)
    await index.aload(THREAD, PageStore(store).list_pages(THREAD))
    app = DeletePagesWithThreads(_server_answering(status), store=store)
    async with client_of(app) as client:
        answer = await client.delete(f"/threads/{THREAD}")
    assert answer.status_code == status
    assert (export_records(store, THREAD) == []) is gone
    assert index.has(THREAD) is not gone  # the index rows go with the records
    assert export_records(store, "other-thread")


def test_the_server_app_without_starlette_names_the_extra(monkeypatch):
    for name in [
        m for m in sys.modules if m == "langmem_paging.server" or m.startswith("langmem_paging.server.")
    ]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "starlette", None)
    with pytest.raises(ImportError, match=r'pip install "langmem-paging\[server\]"'):
        importlib.import_module("langmem_paging.server")


async def test_a_message_still_in_the_context_is_forgotten_over_http_not_refused(paged):
    """A message of the latest checkpoint that no page holds yet is known: the route forgets it (the
    lifecycle record names it, so the next step tombstones it in the state) instead of answering 404."""
    store, saver = paged
    latest = saver.get_tuple({"configurable": {"thread_id": THREAD}})
    resident = latest.checkpoint["channel_values"]["messages"][-1]
    async with client_of(paging_app(store, checkpointer=saver)) as client:
        answer = await client.post(f"/paging/threads/{THREAD}/forget", json={"message_id": resident.id})
    assert answer.status_code == 200, answer.text
    assert answer.json()["pages"] == []
    assert resident.id in PageStore(store).get_lifecycle(THREAD).forgotten


def test_a_client_store_without_a_loop_refuses_sync_calls_naming_the_option():
    from langmem_paging.server import ClientStore

    with pytest.raises(RuntimeError, match="`loop=`"):
        ClientStore(object()).batch([])


async def test_a_thread_with_no_page_yet_forgets_a_message_of_its_checkpoint_over_http():
    """A thread below its budget has checkpoints but no store record. Before: 404 unknown_thread (the
    route knew a thread by its records only) and the message stayed in the next prompt. A message its
    checkpoint does not hold stays 404 (``unknown_message``: the thread is known by its checkpoints)."""
    from langchain.agents import create_agent

    from langmem_paging import PagingMiddleware
    from langmem_paging.testing import ScriptedChatModel

    store, saver = InMemoryStore(), InMemorySaver()
    model = ScriptedChatModel(responses=["Noted."] * 4)
    paging = PagingMiddleware(max_tokens=800, boundary="fixed_4", store=store)
    agent = create_agent(model, middleware=[paging], checkpointer=saver, store=store)
    config = {"configurable": {"thread_id": "young"}}
    agent.invoke({"messages": [HumanMessage("My locker code is Vrtojba77.", id="code")]}, config)
    assert everything(store) == [], "nothing was paged"

    async with client_of(paging_app(store, checkpointer=saver)) as client:
        unknown = await client.delete("/paging/threads/young/messages/no-such-message")
        assert unknown.status_code == 404 and unknown.json()["error"] == "unknown_message"
        assert everything(store) == []
        answer = await client.post("/paging/threads/young/forget", json={"message_id": "code"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["pages"] == []

    await agent.ainvoke({"messages": [HumanMessage("Anything else?")]}, config)
    assert "Vrtojba77" not in " ".join(str(m.content) for m in model.prompts[-1])
    latest = saver.get_tuple(config).checkpoint["channel_values"]
    assert "Vrtojba77" not in repr(latest)
    assert await paging.adelete_thread("young") > 0 and everything(store) == []
