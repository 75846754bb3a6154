"""Index conformance for the page lifecycle (issue 21): a forgotten message and a deleted thread
leave no row that matches, on every index (in-process BM25, SQLite FTS5, PostgreSQL).

The contract, as `PageStore.forget`/`delete_thread` use it: after ``update(thread, changed_pages)``
or ``drop(thread)`` an index either holds the new content or no longer `has` the thread (then the
caller loads it from the store, as the recall flow does). Either way no search matches what left.
"""

from __future__ import annotations

import asyncio

from langmem_paging import InMemoryBM25Index, Page
from langmem_paging.storage.lifecycle import forgotten
from tests.support.indexes import text_page

OLD = [
    text_page(1, "We adopted a greyhound named Comet.", "Lovely."),
    text_page(2, "My card is 4929 1234 under Quixotrix, and pottery is on Tuesday.", "Noted."),
    text_page(3, "My sister runs marathons in Lisbon.", "Impressive."),
]
NEW = [
    text_page(1, "The ferry to Vis leaves from pier Okrug.", "Good to know."),
    text_page(2, "Our cat Miso hates the vacuum cleaner.", "Poor Miso."),
]


def _search(index, thread: str, query: str, stored: list[Page]) -> list[tuple[str, int]]:
    """Search as the recall flow does: a thread the index does not hold is loaded from the store first."""
    if not index.has(thread):
        index.load(thread, stored)
    return [(h.page_id, h.index) for h in index.search(thread, query, limit=10, allow=lambda p: True)]


def _form(index, thread: str, pages: list[Page]) -> None:
    """Index pages as a step does when they form (`add`; a thread starts with its first page)."""
    if index.has(thread):
        index.add(thread, pages)
    else:
        index.load(thread, pages)


def test_forget_leaves_no_row_that_matches_and_keeps_the_rest(index):
    _form(index, "t", OLD)
    _form(index, "u", OLD)  # another thread with the same words: never touched
    assert _search(index, "t", "Quixotrix", OLD) == [("p2", 0)]
    changed = forgotten(OLD[1], "m2_0")
    stored = [OLD[0], changed, OLD[2]]
    index.update("t", [changed])
    for word in ("Quixotrix", "4929", "pottery"):
        assert _search(index, "t", word, stored) == [], word
    assert _search(index, "t", "greyhound", stored) == [("p1", 0)]
    assert _search(index, "t", "Noted", stored) == [("p2", 1)]  # the page's other message stays found
    assert _search(index, "u", "Quixotrix", OLD) == [("p2", 0)]


def test_forget_run_twice_converges(index):
    _form(index, "t", OLD)
    changed = forgotten(OLD[1], "m2_0")
    stored = [OLD[0], changed, OLD[2]]
    index.update("t", [changed])
    index.update("t", [changed])
    assert _search(index, "t", "Quixotrix", stored) == []
    assert _search(index, "t", "marathons", stored) == [("p3", 0)]


def test_delete_then_reuse_of_the_id_is_searchable_and_never_matches_the_deleted_words(index):
    _form(index, "t", OLD)
    _form(index, "u", OLD)
    assert _search(index, "t", "greyhound", OLD)  # the index held the thread (searched before)
    index.drop("t")
    _form(index, "t", NEW)  # a new conversation under the same id: pages numbered from p1 again
    assert _search(index, "t", "ferry Okrug", NEW) == [("p1", 0)]
    assert {pid for pid, _ in _search(index, "t", "Miso", NEW)} == {"p2"}
    for word in ("greyhound", "Quixotrix", "marathons"):
        assert _search(index, "t", word, NEW) == [], word
    assert _search(index, "u", "greyhound", OLD) == [("p1", 0)]


def test_async_twins_forget_and_delete_alike(index):
    async def scenario() -> None:
        await index.aload("t", OLD)
        changed = forgotten(OLD[1], "m2_0")
        await index.aupdate("t", [changed])
        if not await index.ahas("t"):
            await index.aload("t", [OLD[0], changed, OLD[2]])
        assert await index.asearch("t", "Quixotrix", limit=5, allow=lambda p: True) == []
        await index.adrop("t")
        await index.aload("t", NEW)
        assert await index.asearch("t", "greyhound", limit=5, allow=lambda p: True) == []
        assert [h.page_id for h in await index.asearch("t", "Okrug", limit=5, allow=lambda p: True)] == ["p1"]

    asyncio.run(scenario())


def test_the_in_memory_index_of_another_process_never_serves_a_deleted_thread_whose_id_was_reused():
    # process B searched the thread; process A deleted it and a new conversation reused the id: B only
    # sees the new pages arrive (`add`), under page ids it already holds with other content
    other_process = InMemoryBM25Index()
    other_process.load("t", OLD)
    other_process.add("t", NEW[:1])
    assert _search(other_process, "t", "greyhound", NEW) == []
    assert _search(other_process, "t", "Okrug", NEW) == [("p1", 0)]
