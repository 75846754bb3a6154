"""What is special to `AsyncPostgresStore` under a `PageStore`: it belongs to the event loop it was made in.

Its async calls must run on that loop; its sync calls (`batch`) are forwarded to that loop from any
other thread and refused on the loop itself (LangGraph's `InvalidStateError`).
"""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage

from langmem_paging import Page, PageStore
from langmem_paging.core.errors import PageStoreError


def _page(n: int) -> Page:
    return Page(
        id=f"p{n}",
        messages=[HumanMessage(f"fact {n}", id=f"m{n}")],
        bookmark=f"[p{n}:fact]",
        keywords=["fact"],
        token_count=3,
        boundary="fixed_2",
        created_turn=n,
    )


def test_sync_calls_work_from_a_worker_thread_of_the_stores_loop(apostgres_store_on_loop, store_loop):
    pages = PageStore(apostgres_store_on_loop)
    pages.put("t", _page(1))  # this test's thread is not the store's loop: forwarded there
    assert pages.get("t", "p1").messages[0].content == "fact 1"

    async def on_the_loop():
        threaded = await asyncio.to_thread(pages.get, "t", "p1")  # how Pager.arecall reaches `members`
        return threaded, await pages.aget("t", "p1")

    threaded, awaited = store_loop.run(on_the_loop())
    assert threaded == awaited == pages.get("t", "p1")


def test_sync_calls_on_the_stores_own_loop_are_refused_clearly(apostgres_store_on_loop, store_loop):
    pages = PageStore(apostgres_store_on_loop, retries=0)

    async def on_the_loop():
        pages.get("t", "p1")

    with pytest.raises(asyncio.InvalidStateError, match=r"await store\.abatch"):
        store_loop.run(on_the_loop())


@pytest.mark.xfail(
    strict=True,
    raises=PageStoreError,
    reason=(
        "PageStore._abatch awaits AsyncPostgresStore.abatch on the caller's loop; once two calls contend, "
        "the store's asyncio.Lock binds to one loop and every other loop fails ('bound to a different event "
        "loop'). Fix: run the call on the store's own loop when it is another running loop."
    ),
)
def test_async_calls_from_another_event_loop_run_on_the_stores_loop(apostgres_store_on_loop):
    """A script that makes the store once and then calls ``asyncio.run(agent.ainvoke(...))`` per turn,
    or a second loop in another thread, drives the store from loops other than its own."""
    pages = PageStore(apostgres_store_on_loop, retries=0)

    async def turn(base: int):
        await asyncio.gather(*(pages.aput("t", _page(base + k)) for k in range(1, 9)))
        found = await asyncio.gather(*(pages.aget("t", f"p{base + k}") for k in range(1, 9)))
        assert [p.id for p in found] == [f"p{base + k}" for k in range(1, 9)]

    for base in (0, 10, 20):  # three turns, three loops
        asyncio.run(turn(base))


async def test_async_reads_by_primary_key_answer_as_the_store_does(apostgres_store_here):
    """`abatch_reads` (one prepared SELECT, the same source as the sync `batch_reads`) gives what
    `AsyncPostgresStore.abatch` gives; writes and a store with TTLs are left to the store's own batch."""
    from langgraph.store.base import GetOp, PutOp

    from langmem_paging.storage.postgres_reads import abatch_reads

    store = apostgres_store_here
    await store.abatch(
        [
            PutOp(("langmem_paging", "t1", "pages"), "p1", {"a": "x\\0"}),
            PutOp(("langmem_paging", "t1", "stats"), "p1", {"count": 2}),
            PutOp(("langmem_paging", "t", "pages"), "p1", {"other": "thread"}),
        ]
    )
    ops = [
        GetOp(("langmem_paging", "t1", "pages"), "p1"),
        GetOp(("langmem_paging", "t1", "stats"), "p1"),
        GetOp(("langmem_paging", "t1", "pages"), "p9"),
        GetOp(("langmem_paging", "t", "pages"), "p1"),
    ]
    fast = await abatch_reads(store, ops)
    assert fast is not None and [i and (i.namespace, i.key, i.value) for i in fast] == [
        i and (i.namespace, i.key, i.value) for i in await store.abatch(ops)
    ]
    assert fast[2] is None and fast[3].value == {"other": "thread"}
    assert await abatch_reads(store, [*ops, PutOp(("a",), "k", {"v": 1})]) is None
    store.ttl_config = {
        "default_ttl": 60,
        "refresh_on_read": True,
    }  # reads must refresh TTLs: the store's batch
    try:
        assert await abatch_reads(store, ops) is None
    finally:
        store.ttl_config = None


async def test_async_page_reads_take_the_primary_key_path(apostgres_store_here, monkeypatch):
    """A `PageStore` on an `AsyncPostgresStore` reads pages by id without the store's `abatch`
    (one query per namespace, each pipelined with a TTL-refresh CTE); writes still go through it."""
    store = apostgres_store_here
    pages = PageStore(store)
    for n in (1, 2):
        await pages.aput("t", _page(n))
    calls: list[list] = []
    real = store.abatch

    async def counted(ops):
        calls.append(list(ops))
        return await real(ops)

    monkeypatch.setattr(store, "abatch", counted)
    found = await pages.aget_many("t", ["p1", "p2", "p3"])
    assert sorted(found) == ["p1", "p2"] and found["p2"].messages[0].content == "fact 2"
    assert await pages.aget("t", "p1") == found["p1"]
    assert calls == []
    await pages.aput("t", _page(3))
    assert calls
