"""`langmem_paging.server`: a LangGraph server (``langgraph dev``, offline) with
``"http": {"app": "langmem_paging.server:app"}`` deletes a thread's pages when the thread is deleted.

Needs ``langgraph-cli[inmem]`` and ``langgraph-sdk`` (skipped without them, failed under CI=true).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langgraph_server import REPO_ROOT, server_fixture
from test_langgraph_server import client_for, pages_in_store, run_turns

pytestmark = pytest.mark.server


def _cleanup_config(tmp_path_factory) -> Path:
    """The test graph served with the app that deletes pages with their threads."""
    config = tmp_path_factory.mktemp("cleanup-config") / "langgraph.json"
    config.write_text(json.dumps({
        "dependencies": [str(REPO_ROOT)],
        "graphs": {"paging_test": f"{REPO_ROOT / 'graphs' / 'server_test_graph.py'}:graph"},
        "http": {"app": "langmem_paging.server:app"},
    }))
    return config


cleanup_server = server_fixture(_cleanup_config, name="cleanup_server")


def test_deleting_a_thread_deletes_its_pages_and_only_its_pages(cleanup_server):
    client = client_for(cleanup_server)
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
