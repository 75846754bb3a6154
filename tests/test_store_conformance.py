"""Every store backend round-trips pages exactly and keeps threads apart (sync and async)."""

from __future__ import annotations

import pytest
from conversations import conversation

from langmem_paging import Ledger, Page, PageStore, thread_namespace


def _page(n: int, messages) -> Page:
    return Page(id=f"p{n}", messages=messages, bookmark=f"[p{n}:x]", keywords=["x"], token_count=10,
                boundary="fixed_20", created_turn=n)


@pytest.fixture(params=["sync", "async"])
def io(request):
    """Call PageStore methods the sync or the async way, with one test body."""
    mode = request.param

    async def call(store: PageStore, name: str, *args):
        method = getattr(store, name if mode == "sync" else f"a{name}")
        return method(*args) if mode == "sync" else await method(*args)

    return call


async def test_pages_round_trip_exactly(base_store, io):
    store = PageStore(base_store)
    history = conversation(8, seed=4)  # tool calls, metadata, timestamps
    pages = [_page(n + 1, history[n * 5 : n * 5 + 5]) for n in range(3)]
    for page in pages:
        await io(store, "put", "thread-1", page)
    assert await io(store, "get", "thread-1", "p2") == pages[1]
    assert await io(store, "list", "thread-1") == pages


async def test_list_pages_past_one_batch_in_page_order(base_store, io):
    store = PageStore(base_store)
    history = conversation(1, seed=0, system=False, tools=False)
    for n in range(1, 131):
        await io(store, "put", "t", _page(n, history))
    assert [p.id for p in await io(store, "list", "t")] == [f"p{n}" for n in range(1, 131)]


async def test_threads_never_see_each_others_pages(base_store, io):
    store = PageStore(base_store)
    history = conversation(2, seed=0, system=False)
    await io(store, "put", "alice", _page(1, history[:2]))
    await io(store, "put", "alice.v2", _page(7, history[2:]))  # dots are legal thread ids
    assert await io(store, "get", "bob", "p1") is None
    assert await io(store, "list", "bob") == []
    assert [p.id for p in await io(store, "list", "alice")] == ["p1"]
    assert [p.id for p in await io(store, "list", "alice.v2")] == ["p7"]


async def test_malformed_page_ids_are_not_found(base_store, io):
    store = PageStore(base_store)
    for bad in ["", "p", "P1", "p1/../p2", "1", "p-1"]:
        assert await io(store, "get", "t", bad) is None


async def test_ledger_round_trips_and_stats_show_on_pages(base_store, io):
    store = PageStore(base_store)
    history = conversation(1, seed=0, system=False)
    ledger = Ledger(turn=3)
    await io(store, "put_many", "t", [_page(1, history)], ledger)
    assert await io(store, "get_ledger", "t") == ledger
    assert await io(store, "get_ledger", "other") is None


async def test_search_ranks_by_bm25_within_the_thread(base_store, io):
    from langchain_core.messages import HumanMessage

    store = PageStore(base_store)
    await io(store, "put", "t", _page(1, [HumanMessage("We adopted a greyhound named Comet.", id="a")]))
    await io(store, "put", "t", _page(2, [HumanMessage("The pottery class meets on Tuesday.", id="b")]))
    await io(store, "put", "other", _page(3, [HumanMessage("Comet the greyhound again.", id="c")]))
    assert [p.id for p in await io(store, "search", "t", "greyhound comet", 3)] == ["p1"]
    assert await io(store, "search", "t", "submarine", 3) == []


def test_namespace_is_built_in_one_place_and_needs_a_thread():
    assert thread_namespace("a.b", "pages") == ("langmem_paging", "a%2Eb", "pages")
    with pytest.raises(ValueError, match="thread_id"):
        thread_namespace("", "pages")
