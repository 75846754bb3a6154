"""The paging agent behind a real LangGraph server (`langgraph dev`, offline), driven by `langgraph-sdk`.

The server supplies the checkpointer and the store: paged-out messages must land in *its* store
under ``("langmem_paging", ...)``, bookmarks must stand in the thread state, and the model's
``recall`` must bring back the original text. Needs ``langgraph-cli[inmem]`` and ``langgraph-sdk``
(skipped without them, failed under CI=true). Deselect with ``-k "not langgraph_server"``.
"""

from __future__ import annotations

import time

import pytest

from tests.support.langgraph_server import REPO_ROOT, TEST_CONFIG, server_fixture

demo_server = server_fixture(REPO_ROOT / "langgraph.json", name="demo_server")
test_server = server_fixture(TEST_CONFIG, name="test_server")

TURNS = 30
NAMESPACE_ROOT = "langmem_paging"
SEARCH_LIMIT = 100


def turn_text(i: int) -> str:
    return (
        f"Note {i}: my neighbour Zarko{i} keeps {i + 3} beehives near Lake Bled{i} since 19{i:02d}, "
        f"sells the honey at the Saturday market in Radovljica{i}, and paints every hive {i}-blue."
    )


def bookmark_messages(messages: list[dict]) -> list[dict]:
    """The page and cluster bookmarks among a thread state's (serialized) messages.

    The one place that knows the bookmark format: loosen it here if the format changes.
    """
    return [
        m
        for m in messages
        if str(m.get("content", "")).startswith(("[p", "[c"))
        and NAMESPACE_ROOT in (m.get("additional_kwargs") or {})
    ]


def client_for(server):
    from langgraph_sdk import get_sync_client

    return get_sync_client(url=server.url, timeout=60)


def run_turns(client, thread_id: str, graph_id: str, turns: int = TURNS, *, enqueue: bool = False) -> float:
    """`turns` user messages, one run each; returns the seconds they took.

    One `runs.wait` after another costs ~1 s a run whatever the graph does: the in-memory server's
    queue polls every 0.5 s and takes only runs created before the poll began. With `enqueue` all
    runs are created at once (``multitask_strategy="enqueue"``) and run in order on the thread.
    """
    started = time.monotonic()
    inputs = [{"messages": [{"role": "user", "content": turn_text(i)}]} for i in range(turns)]
    if not enqueue:
        for payload in inputs:
            client.runs.wait(thread_id, graph_id, input=payload)
        return time.monotonic() - started
    runs = [client.runs.create(thread_id, graph_id, input=p, multitask_strategy="enqueue") for p in inputs]
    client.runs.join(thread_id, runs[-1]["run_id"])
    statuses = {r["run_id"]: r["status"] for r in client.runs.list(thread_id, limit=turns + 10)}
    assert [statuses.get(r["run_id"]) for r in runs] == ["success"] * turns, statuses
    return time.monotonic() - started


def pages_in_store(client, thread_id: str) -> list[dict]:
    items, offset = [], 0
    while True:
        batch = client.store.search_items((NAMESPACE_ROOT, thread_id), limit=SEARCH_LIMIT, offset=offset)[
            "items"
        ]
        items += batch
        offset += len(batch)
        if len(batch) < SEARCH_LIMIT:
            return items


def check_paged(client, server, thread_id: str, graph_id: str, *, enqueue: bool = False) -> list[dict]:
    seconds = run_turns(client, thread_id, graph_id, enqueue=enqueue)
    messages = client.threads.get_state(thread_id)["values"]["messages"]
    assert bookmark_messages(messages), [m.get("content") for m in messages]
    items = pages_in_store(client, thread_id)
    assert items, "no items under ('langmem_paging', thread_id) in the server's store"
    assert all(item["namespace"][:2] == [NAMESPACE_ROOT, thread_id] for item in items)
    # The bare root prefix finds them too (the store is shared by all threads).
    everything = client.store.search_items((NAMESPACE_ROOT,), limit=100)["items"]
    assert any(item["namespace"][1] == thread_id for item in everything)
    print(
        f"\n[{graph_id}] server ready in {server.start_seconds:.2f}s; {TURNS} runs "
        f"({'enqueued' if enqueue else 'one runs.wait after another'}) in {seconds:.2f}s; "
        f"{len(messages)} messages in state, {len(bookmark_messages(messages))} bookmarks, "
        f"{len(items)} store items; server RSS {server.rss_kib() / 1024:.0f} MiB"
    )
    return messages


@pytest.mark.slow
def test_demo_graph_from_root_config_pages_into_the_server_store(demo_server):
    client = client_for(demo_server)
    assert "paging_agent" in {a["graph_id"] for a in client.assistants.search(limit=100)}
    thread_id = client.threads.create()["thread_id"]
    check_paged(client, demo_server, thread_id, "paging_agent")


@pytest.mark.slow
def test_model_recalls_a_page_from_the_server_store(test_server):
    client = client_for(test_server)
    thread_id = client.threads.create()["thread_id"]
    check_paged(client, test_server, thread_id, "paging_test", enqueue=True)

    client.runs.wait(thread_id, "paging_test", input={"messages": [{"role": "user", "content": "RECALL p1"}]})

    messages = client.threads.get_state(thread_id)["values"]["messages"]
    calls = [c for m in messages if m.get("type") == "ai" for c in m.get("tool_calls") or []]
    assert {"name": "recall", "args": {"page_ids": ["p1"]}} in [
        {"name": c["name"], "args": c["args"]} for c in calls
    ]
    tool_messages = [m for m in messages if m.get("type") == "tool"]
    assert tool_messages, "the recall tool did not run"
    assert tool_messages[-1]["name"] == "recall"
    assert turn_text(0) in tool_messages[-1]["content"]


@pytest.mark.slow
def test_threads_do_not_share_pages(test_server):
    client = client_for(test_server)
    first, second = (client.threads.create()["thread_id"] for _ in range(2))
    run_turns(client, first, "paging_test", turns=12, enqueue=True)
    assert pages_in_store(client, first)
    assert not pages_in_store(client, second)
