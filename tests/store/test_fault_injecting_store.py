"""`langmem_paging.testing.FaultInjectingStore`: which calls fail, where, and what it records.

The fault, crash and fuzz tests rely on each of these; sync `batch` and async `abatch` are one test.
"""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from langgraph.store.base import GetOp, PutOp
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langmem_paging.testing import FaultInjectingStore, PagingThread, StoreFault

PAGE_NS = ("langmem_paging", "t", "pages")


def put(key: str, digest: str) -> PutOp:
    return PutOp(PAGE_NS, key, {"digest": digest, "messages": []})


def get(key: str) -> GetOp:
    return GetOp(PAGE_NS, key)


def run(store: FaultInjectingStore, ops: list, mode: str) -> list:
    """One `batch` call, or one `abatch` call on a fresh event loop."""
    return store.batch(ops) if mode == "sync" else asyncio.run(store.abatch(ops))


MODES = ["sync", "async"]


@pytest.mark.parametrize("mode", MODES)
def test_fail_at_counts_calls_from_one_since_arm(mode):
    store = FaultInjectingStore(InMemoryStore(), fail_at=[2])
    run(store, [get("a")], mode)
    with pytest.raises(StoreFault, match="call 2"):
        run(store, [get("a")], mode)
    run(store, [get("a")], mode)
    store.arm(fail_at=[1])
    assert store.calls == 0
    with pytest.raises(StoreFault, match="call 1"):
        run(store, [get("a")], mode)
    assert (store.calls, store.failures) == (1, 2)


@pytest.mark.parametrize("mode", MODES)
def test_a_failure_before_the_call_writes_nothing_and_one_after_it_landed_writes(mode):
    before = FaultInjectingStore(InMemoryStore(), fail_at=[1])
    with pytest.raises(StoreFault):
        run(before, [put("p1", "d1")], mode)
    assert before.store.get(PAGE_NS, "p1") is None
    landed = FaultInjectingStore(InMemoryStore(), fail_at=[1], landed=1.0)
    with pytest.raises(StoreFault, match="after the call landed"):
        run(landed, [put("p1", "d1")], mode)
    assert landed.store.get(PAGE_NS, "p1").value["digest"] == "d1"


def test_random_failures_follow_the_seed_and_stop_when_disabled():
    def pattern(seed: int) -> list[bool]:
        store = FaultInjectingStore(InMemoryStore(), p=0.3, seed=seed)
        failed = []
        for _ in range(40):
            try:
                store.batch([get("a")])
            except StoreFault:
                failed.append(True)
            else:
                failed.append(False)
        return failed

    assert pattern(7) == pattern(7) and any(pattern(7)) and not all(pattern(7))
    store = FaultInjectingStore(InMemoryStore(), p=1.0, error=TimeoutError)
    with pytest.raises(TimeoutError):
        store.batch([get("a")])
    store.enabled = False
    store.batch([get("a")])
    assert store.calls == 2


def test_on_call_runs_with_the_call_number_before_the_store_sees_it():
    seen: list[tuple[int, object]] = []
    inner = InMemoryStore()
    store = FaultInjectingStore(inner, on_call=lambda n: seen.append((n, inner.get(PAGE_NS, "p1"))))
    store.batch([put("p1", "d1")])
    store.batch([get("p1")])
    assert [n for n, _ in seen] == [1, 2]
    assert seen[0][1] is None and seen[1][1] is not None


def test_page_records_written_again_with_other_content_are_recorded():
    store = FaultInjectingStore(InMemoryStore())
    store.batch([put("p1", "d1"), put("p2", "d2")])
    store.batch([put("p1", "d1")])  # the same record again: fine
    assert store.rewrites == []
    store.batch([put("p2", "other")])
    assert store.rewrites == ["t/pages/p2: d2 -> other"]
    store.batch([PutOp(PAGE_NS, "p1", {"digest": "d1", "messages": [], "keywords": ["y"]})])
    assert store.rewrites[1:] == ["t/pages/p1: d1 (same messages, other content)"]


def test_ttl_support_is_the_wrapped_stores():
    assert FaultInjectingStore(InMemoryStore()).supports_ttl == InMemoryStore().supports_ttl
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    sqlite = SqliteStore(conn, ttl={"default_ttl": 1.0})
    sqlite.setup()
    assert FaultInjectingStore(sqlite).supports_ttl is True
    assert FaultInjectingStore(sqlite).ttl_config == sqlite.ttl_config


def test_abatch_over_a_sync_only_store_is_one_counted_call():
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    inner = SqliteStore(conn)  # no async implementation: abatch runs its batch in a worker thread
    inner.setup()
    store = FaultInjectingStore(inner)
    asyncio.run(store.abatch([put("p1", "d1")]))
    assert store.calls == 1 and inner.get(PAGE_NS, "p1").value["digest"] == "d1"


def test_each_call_is_noted_as_a_paging_step_or_a_recall():
    store = FaultInjectingStore(InMemoryStore())
    thread = PagingThread(max_tokens=376, boundary="fixed_2", store=store)
    for i in range(12):
        thread.turn(f"Note {i}: Zarko{i} keeps {i} beehives near Lake Bled.", "Noted.")
    assert store.phases and set(store.phases) == {"step"}
    store.arm()
    assert "Zarko0" in thread.call_recall(page_ids=["p1"]).content
    assert store.phases and set(store.phases) == {"recall"}
