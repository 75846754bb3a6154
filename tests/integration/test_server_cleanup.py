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
