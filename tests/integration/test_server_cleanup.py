"""`langmem_paging.server`: a LangGraph server (``langgraph dev``, offline) with
``"http": {"app": "langmem_paging.server:app"}`` deletes a thread's pages when the thread is deleted.

The server runs the repository's shipped ``langgraph.json`` (its ``http`` app and its graphs), with
the small test graph added beside them, so a shipped config that lost the app fails here.

Needs ``langgraph-cli[inmem]`` and ``langgraph-sdk`` (skipped without them, failed under CI=true).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_langgraph_server import client_for, pages_in_store, run_turns
from tests.support.langgraph_server import REPO_ROOT, resolved_config, server_fixture

pytestmark = pytest.mark.server


SHIPPED_CONFIG = REPO_ROOT / "langgraph.json"
CLEANUP_APP = "langmem_paging.server:app"


def _cleanup_config(tmp_path_factory) -> Path:
    """The shipped langgraph.json as it is (http app included), plus the test graph."""
    config = tmp_path_factory.mktemp("cleanup-config") / "langgraph.json"
    config.write_text(
        json.dumps(
            {
                **resolved_config(SHIPPED_CONFIG),
                "graphs": {
                    **resolved_config(SHIPPED_CONFIG)["graphs"],
                    "paging_test": f"{REPO_ROOT / 'graphs' / 'server_test_graph.py'}:graph",
                },
            }
        )
    )
    return config


def test_the_shipped_langgraph_json_serves_the_cleanup_app():
    shipped = json.loads(SHIPPED_CONFIG.read_text())
    assert shipped.get("http", {}).get("app") == CLEANUP_APP
    from starlette.applications import Starlette

    from langmem_paging import server

    assert isinstance(server.app, Starlette)
    assert [m.cls for m in server.app.user_middleware] == [server.DeletePagesWithThreads]


cleanup_server = server_fixture(_cleanup_config, name="cleanup_server")


def test_deleting_a_thread_deletes_its_pages_and_only_its_pages(cleanup_server):
    client = client_for(cleanup_server)
    assert {"paging_agent", "paging_test"} <= {a["graph_id"] for a in client.assistants.search(limit=100)}
    doomed, kept = (client.threads.create()["thread_id"] for _ in range(2))
    run_turns(client, doomed, "paging_test", turns=12, enqueue=True)
    run_turns(client, kept, "paging_test", turns=12, enqueue=True)
    assert pages_in_store(client, doomed) and pages_in_store(client, kept)
    kept_before = pages_in_store(client, kept)

    client.threads.delete(doomed)

    assert pages_in_store(client, doomed) == []  # gone before the delete call returned
    # through the page lifecycle on the server's store (index rows and claims too), not the store API
    log = cleanup_server.log_path.read_text(errors="replace")
    assert f"of deleted thread {doomed} (langgraph_api.store.get_store)" in log
    assert pages_in_store(client, kept) == kept_before
    with pytest.raises(Exception, match="not found"):
        client.threads.get(doomed)


def test_pruning_threads_deletes_their_pages_and_a_refused_prune_deletes_nothing(cleanup_server):
    from langgraph_sdk.errors import UnprocessableEntityError

    client = client_for(cleanup_server)
    pruned, trimmed = (client.threads.create()["thread_id"] for _ in range(2))
    for thread_id in (pruned, trimmed):
        run_turns(client, thread_id, "paging_test", turns=12, enqueue=True)
    trimmed_before = pages_in_store(client, trimmed)

    try:  # keeps the thread: its pages stay (the in-memory runtime refuses it with 422: they stay too)
        client.threads.prune([trimmed], strategy="keep_latest")
    except UnprocessableEntityError:
        pass
    assert client.threads.prune([pruned]) == {"pruned_count": 1}

    assert pages_in_store(client, pruned) == []
    assert pages_in_store(client, trimmed) == trimmed_before


def test_the_adapter_finds_the_server_internals_it_relies_on():
    """`langmem_paging.server.reach` relies on two names of langgraph-api: fail here, loudly, when
    they move (run in a child process: importing the server's package here would configure it)."""
    import subprocess
    import sys

    from tests.support.langgraph_server import offline_env, skip_unless_server_available

    skip_unless_server_available()
    check = (
        "import inspect\n"
        "import langgraph_api.store as s\n"
        "from langgraph_api.middleware import ensure_store as e\n"
        "assert inspect.iscoroutinefunction(s.get_store), 'langgraph_api.store.get_store moved'\n"
        "assert e.api_get_store is s.get_store, 'EnsureStoreAccessible no longer uses get_store'\n"
        "assert 'var_child_runnable_config' in inspect.getsource(e.EnsureStoreAccessible), "
        "'EnsureStoreAccessible no longer sets the config langgraph.config.get_store reads'\n"
    )
    env = offline_env()  # what `langgraph dev` sets for its in-memory runtime
    env.update(
        LANGGRAPH_RUNTIME_EDITION="inmem",
        REDIS_URI="fake",
        DATABASE_URI=":memory:",
        MIGRATIONS_PATH="__inmem",
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_paging_routes_work_in_the_server_and_ordinary_requests_too(cleanup_server):
    import httpx

    client = client_for(cleanup_server)
    thread_id = client.threads.create()["thread_id"]
    run_turns(client, thread_id, "paging_test", turns=12, enqueue=True)
    assert client.threads.get_state(thread_id)["values"]["messages"]  # ordinary requests answer
    items = pages_in_store(client, thread_id)
    page = next(i for i in items if i["namespace"][2] == "pages")
    message_id = next(m["data"]["id"] for m in page["value"]["messages"] if m["type"] == "human")
    paging = f"{cleanup_server.url}/paging"

    with httpx.Client(timeout=60, trust_env=False) as http:
        ready = http.get(f"{paging}/ready")
        exported = http.get(f"{paging}/threads/{thread_id}/export")
        verified = http.get(f"{paging}/threads/{thread_id}/verify")
        unknown = http.get(f"{paging}/threads/no-such-thread/export")
        bad = http.post(f"{paging}/threads/{thread_id}/forget", json={"message_id": "a\nb"})
        forgot = http.post(f"{paging}/threads/{thread_id}/forget", json={"message_id": message_id})
        forgotten_page = client.store.get_item(page["namespace"], page["key"])["value"]
        deleted = http.delete(f"{paging}/threads/{thread_id}/pages")

    assert ready.status_code == 200, ready.text
    assert ready.json()["store_from"] == "langgraph.config.get_store"  # the supported way, in a request
    assert len(exported.json()["records"]) == len(items)
    assert verified.status_code == 200 and verified.json()["lossless"] is True, verified.text
    assert unknown.status_code == 404 and bad.status_code == 400
    assert forgot.status_code == 200 and page["key"] in forgot.json()["pages"], forgot.text
    stored = [m["data"] for m in forgotten_page["messages"] if m["data"]["id"] == message_id]
    assert [m["content"] for m in stored] == ["[forgotten]"]
    assert deleted.status_code == 200 and pages_in_store(client, thread_id) == []
    assert client.threads.get(thread_id)["thread_id"] == thread_id  # the thread itself stays


async def test_a_client_store_works_on_a_deployment_through_its_store_api(cleanup_server):
    """`ClientStore`: the library's operations on a server's store from outside it (and the app's
    fallback where the store object is not reachable), async and sync (on the client's loop)."""
    import asyncio

    from langgraph_sdk import get_client

    from langmem_paging import PageStore
    from langmem_paging.ops import export_records
    from langmem_paging.server import ClientStore, adelete_thread_pages

    sync_client = client_for(cleanup_server)
    thread_id = sync_client.threads.create()["thread_id"]
    run_turns(sync_client, thread_id, "paging_test", turns=12, enqueue=True)
    items = pages_in_store(sync_client, thread_id)
    client = get_client(url=cleanup_server.url)
    store = ClientStore(client, loop=asyncio.get_running_loop())
    pages = PageStore(store)

    listed = await pages.alist_pages(thread_id)
    message_id = next(m.id for m in listed[0].messages if m.type == "human")
    exported = await asyncio.to_thread(export_records, store, thread_id)  # sync, on the client's loop
    changed = await pages.aforget(thread_id, message_id)
    forgotten = await pages.aget(thread_id, listed[0].id)
    deleted = await adelete_thread_pages(client, thread_id)

    assert len(exported) == len(items) and listed[0].id in changed
    assert [m.content for m in forgotten.messages if m.id == message_id] == ["[forgotten]"]
    assert deleted == len(items) and pages_in_store(sync_client, thread_id) == []
