"""The page store conformance suite: every backend, sync and async, one test body each."""

from __future__ import annotations

import asyncio
import dataclasses
import functools

import pytest
from langchain_core.messages import HumanMessage

from langmem_paging import ClusterNode, Page, PageStore, PagingState, thread_namespace
from langmem_paging.core.records import messages_digest
from langmem_paging.core.state import ClusterEntry
from tests.support.backends import store_rows
from tests.support.conversations import conversation


def _page(n: int, messages, **extra) -> Page:
    return Page(
        id=f"p{n}",
        messages=messages,
        bookmark=f"[p{n}:x]",
        keywords=["x"],
        token_count=10,
        boundary="fixed_20",
        created_turn=n,
        order=n * 10,
        digest=messages_digest(messages),
        **extra,
    )


@pytest.fixture(params=["sync", "async"])
def io(request):
    """Call PageStore methods the sync or the async way, with one test body. Sync calls run in a worker
    thread, as sync code does beside an event loop: an AsyncPostgresStore refuses them on its own loop."""
    mode = request.param

    async def call(store: PageStore, name: str, *args, **kwargs):
        if mode == "sync":
            return await asyncio.to_thread(getattr(store, name), *args, **kwargs)
        return await getattr(store, f"a{name}")(*args, **kwargs)

    return call


async def test_pages_round_trip_exactly(base_store, io):
    store = PageStore(base_store)
    history = conversation(8, seed=4)  # tool calls, metadata, timestamps
    pages = [_page(n + 1, history[n * 5 : n * 5 + 5], features={"terms": {"a": 1.5}}) for n in range(3)]
    for page in pages:
        await io(store, "put", "thread-1", page)
    assert await io(store, "get", "thread-1", "p2") == pages[1]
    assert await io(store, "get_many", "thread-1", ["p3", "p1", "p9"]) == {"p3": pages[2], "p1": pages[0]}
    assert await io(store, "list_pages", "thread-1") == pages


async def test_list_pages_past_one_batch_in_page_order(base_store, io):
    store = PageStore(base_store)
    history = conversation(1, seed=0, system=False, tools=False)
    for n in range(1, 431):
        await io(store, "put", "t", _page(n, history))
    assert [p.id for p in await io(store, "list_pages", "t")] == [f"p{n}" for n in range(1, 431)]


async def test_threads_never_see_each_others_pages(base_store, io):
    store = PageStore(base_store)
    history = conversation(2, seed=0, system=False)
    await io(store, "put", "alice", _page(1, history[:2]))
    await io(store, "put", "alice.v2", _page(7, history[2:]))  # dots are legal thread ids
    assert await io(store, "get", "bob", "p1") is None
    assert await io(store, "list_pages", "bob") == []
    assert [p.id for p in await io(store, "list_pages", "alice")] == ["p1"]
    assert [p.id for p in await io(store, "list_pages", "alice.v2")] == ["p7"]


async def test_malformed_page_ids_are_not_found(base_store, io):
    store = PageStore(base_store)
    await io(store, "put", "t", _page(1, [HumanMessage("x", id="x")]))
    for bad in ["", "p", "P1", "p1/../p2", "1", "p-1", "p01", None, 3]:
        assert await io(store, "get", "t", bad) is None


async def test_reserve_skips_numbers_other_branches_took_and_reuses_its_own(base_store, io):
    store = PageStore(base_store)
    mine = [HumanMessage("mine", id="m")]
    theirs = [HumanMessage("theirs", id="t")]
    other_branch = _page(1, theirs)
    await io(store, "commit", "t", pages=[other_branch], nodes=[], state=PagingState(next={"p": 2, "c": 1}))

    fork = PagingState()  # a branch from before p1 was formed
    numbers = await io(store, "reserve", "t", "p", [messages_digest(mine)], fork)
    assert numbers == [2] and fork.spans["p"] == [[2, 3]] and not fork.owns("p", 1)

    same = PagingState()  # a retry of the step that formed p1 gets p1 back
    assert await io(store, "reserve", "t", "p", [other_branch.digest], same) == [1]


async def test_a_record_is_written_once(base_store, io):
    """Correctness v5, bug 1: a page formed again (same messages, other keywords) was written over its
    record. `reserve` hands the stored record back with its number, and `commit` writes no record
    twice: the same digest is skipped, another digest is refused (False: the step goes again) and nothing in the batch is written."""
    store = PageStore(base_store)
    messages = [HumanMessage("kept", id="k")]
    first = _page(1, messages)
    await io(store, "commit", "t", pages=[first], nodes=[], state=PagingState(next={"p": 2, "c": 1}))

    numbers = await io(store, "reserve", "t", "p", [first.digest], PagingState())
    assert numbers == [1] and Page.from_dict(numbers.held[1]).bookmark == "[p1:x]"
    again = dataclasses.replace(first, bookmark="[p1:y]", keywords=["y"])
    await io(store, "commit", "t", pages=[again], nodes=[], state=PagingState(next={"p": 2, "c": 1}))
    assert (await io(store, "get", "t", "p1")).to_dict() == first.to_dict()

    other = _page(1, [HumanMessage("other", id="o")])
    refused = await io(store, "commit", "t", pages=[_page(2, messages), other], nodes=[], state=PagingState())
    assert refused is False  # nothing written: the step goes again past the number
    assert (await io(store, "get", "t", "p1")).to_dict() == first.to_dict()
    assert await io(store, "get", "t", "p2") is None


async def test_commit_writes_the_forest_and_find_follows_it(base_store, io):
    store = PageStore(base_store)
    history = conversation(3, seed=1, system=False, tools=False)
    pages = [_page(n, history[n - 1 : n]) for n in (1, 2, 3)]
    c1 = ClusterNode(
        id="c1", children=["p1", "p2"], size=2, first_page=1, last_page=2, bookmark="[c1:x|p1-p2]"
    )
    c2 = ClusterNode(
        id="c2", children=["c1", "p3"], size=3, first_page=1, last_page=3, bookmark="[c2:x|p1-p3]"
    )
    state = PagingState(next={"p": 4, "c": 3}, spans={"p": [[1, 4]], "c": [[1, 3]]})
    await io(store, "commit", "t", pages=pages, nodes=[c1, c2], state=state)

    # find and members are sync only: from async code they run in a worker thread (as `Pager.arecall`
    # does), since a loop-bound store (AsyncPostgresStore) refuses sync calls on its own loop
    find, members = (functools.partial(asyncio.to_thread, f) for f in (store.find, store.members))
    assert await find("t", "p1") == "c2" and await find("t", "p3") == "c2" and await find("t", "c1") == "c2"
    assert await find("t", "c2") is None
    assert await members("t", "c2") == ["p1", "p2", "p3"] and await members("t", "c1") == ["p1", "p2"]
    # branch-exact: a branch that made only c1 sees p1 in c1
    older = PagingState(spans={"p": [[1, 4]], "c": [[1, 2]]})
    older.clusters = {"c1": ClusterEntry(anchor="m1", text="[c1:x|p1-p2]", tokens=9, size=2, first=1, last=2)}
    assert await find("t", "p1", state=older) == "c1"
    assert (await io(store, "get_clusters", "t", ["c2", "c9"])).keys() == {"c2"}


async def test_delete_thread_removes_only_that_thread(base_store, io):
    store = PageStore(base_store)
    history = conversation(2, seed=0, system=False, tools=False)
    node = ClusterNode(id="c1", children=["p1"], size=1, first_page=1, last_page=1, bookmark="[c1:x|p1]")
    state = PagingState(next={"p": 2, "c": 2})
    await io(store, "commit", "gone", pages=[_page(1, history[:1])], nodes=[node], state=state)
    await io(store, "commit", "kept", pages=[_page(1, history[:1])], nodes=[], state=state)
    deleted = await io(store, "delete_thread", "gone")
    assert deleted >= 4  # page, cluster, parent pointer, high-water mark
    assert await io(store, "get", "gone", "p1") is None and await io(store, "list_pages", "gone") == []
    assert (await io(store, "get", "kept", "p1")) is not None


def test_ttl_needs_a_store_that_supports_it(base_store):
    if getattr(base_store, "supports_ttl", False):
        store = PageStore(base_store, ttl=5)
        store.put("t", _page(1, [HumanMessage("x", id="x")]))
        rows = store_rows(base_store, "SELECT expires_at, ttl_minutes FROM store WHERE key = 'p1'")
        assert rows and all(row[0] is not None and float(row[1]) == 5 for row in rows)
    else:
        with pytest.raises(ValueError, match="`ttl` needs a store with TTL support"):
            PageStore(base_store, ttl=5)


def test_a_store_of_the_wrong_type_is_refused_at_construction():
    with pytest.raises(TypeError, match="LangGraph BaseStore"):
        PageStore("sqlite")


def test_namespace_is_built_in_one_place_and_needs_a_thread():
    assert thread_namespace("a.b", "pages") == ("langmem_paging", "a%2Eb", "pages")
    with pytest.raises(ValueError, match="thread_id"):
        thread_namespace("", "pages")


async def test_forget_leaves_a_tombstone_in_every_page_holding_the_message_and_nothing_else(base_store, io):
    from langmem_paging.index.base import InMemoryBM25Index
    from langmem_paging.storage.page_store import FORGOTTEN

    store = PageStore(base_store)
    history = conversation(6, seed=3)
    secret = HumanMessage("my card is 4111 1111 1111 1111", id="secret")
    pages = [_page(1, [*history[:3], secret]), _page(2, history[3:8]), _page(3, [secret, *history[8:10]])]
    for page in pages:
        await io(store, "put", "t", page)
    await io(store, "put", "other", _page(1, [secret]))
    index = InMemoryBM25Index()
    index.load("t", pages)
    assert await io(store, "forget", "t", "secret", index=index) == ["p1", "p3"]
    after = await io(store, "list_pages", "t")
    assert [m.content for p in after for m in p.messages if m.id == "secret"] == [FORGOTTEN, FORGOTTEN]
    assert [[m for m in p.messages if m.id != "secret"] for p in after] == [
        [m for m in p.messages if m.id != "secret"] for p in pages
    ]
    assert not index.has("t"), "the in-process index drops the thread, to reload it from the store"
    assert (await io(store, "get", "other", "p1")).messages == [secret], "another thread keeps its own"
