"""Core v4 (issue 23): the keyword sketch leaves the checkpoint.

Before: the checkpointed `paging` value carried the thread's keyword sketch (`doc_freq`, up to 512
terms grouped by count), written at every step: 1.2-2.2x the messages channel at B=900. Now, with a
store, the sketch is one store record per thread (``meta``/``sketch``), read by a step that forms
pages and written with them at commit; forget scrubs it and delete_thread deletes it with the
thread. The pure `page_messages` (no store) still carries it in the state.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from itertools import groupby

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langmem_paging import PagingMiddleware, TokenCounter, page_messages
from langmem_paging.core.messages import merge_messages
from langmem_paging.core.records import page_number
from langmem_paging.core.sketch import TermSketch, add_terms, grouped, ungrouped
from langmem_paging.core.state import PagingState
from langmem_paging.core.text import search_terms
from langmem_paging.core.tokens import message_text
from langmem_paging.storage.page_store import thread_namespace
from langmem_paging.strategies.bookmarks import BookmarkContext, PageDraft, as_bookmarker
from langmem_paging.testing import ScriptedChatModel

THREAD = "sketch"
CONFIG = {"configurable": {"thread_id": THREAD}}
# "beehives" is on every page: a thread IDF scores it below the words that tell the pages apart
COLOURS = ["crimson", "teal", "ochre", "violet", "amber", "olive"]
# early notes all name the ferry to Lisbon, one late note does too: only a sketch of the whole thread
# (not of the pages formed at one step) knows that Lisbon says little about that page
FACTS = [
    f"Note {i}: my neighbour Zarko{i} keeps {i + 2} beehives near Lake Bled{i}, painted {c}"
    + (", by the Lisbon ferry." if i < 10 or i == 14 else ".")
    for i, c in enumerate(COLOURS * 3)
]
CARD = "My card is 4929 1234 5678 9012, under the name Quixotrix. Keep it."


def _agent(store, *, checkpointer=None, responses=None, max_tokens=476):
    paging = PagingMiddleware(max_tokens=max_tokens, boundary="fixed_2", store=store)
    model = ScriptedChatModel(responses=responses or ["Noted."] * 60)
    agent = create_agent(
        model, middleware=[paging], store=store, checkpointer=checkpointer or InMemorySaver()
    )
    return agent, paging


def _run(agent, texts, prefix="h", *, use_async=False):
    for n, text in enumerate(texts):
        update = {"messages": [HumanMessage(text, id=f"{prefix}{n}")]}
        if use_async:
            asyncio.run(agent.ainvoke(update, CONFIG))
        else:
            agent.invoke(update, CONFIG)


def _replayed_bookmarks(pages):
    """The bookmarks the checkpointed sketch gave: pages counted in order, those formed at one
    step counted together before any of them is bookmarked."""
    table: dict[str, int] = {}
    n_docs, out = 0, {}
    for _, batch in groupby(sorted(pages, key=lambda p: page_number(p.id)), key=lambda p: p.created_turn):
        batch = list(batch)
        for page in batch:
            n_docs += 1
            add_terms(table, dict.fromkeys(search_terms("\n".join(message_text(m) for m in page.messages))))
        context = BookmarkContext(count_text=TokenCounter().count_text, doc_freq=dict(table), n_docs=n_docs)
        drafts = [PageDraft(p.id, p.messages) for p in batch]
        out.update(
            {p.id: b.text for p, b in zip(batch, as_bookmarker(None).bookmark(drafts, context), strict=True)}
        )
    return out


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_checkpoint_through_create_agent_holds_no_sketch_and_the_store_holds_it(use_async):
    store = InMemoryStore()
    agent, paging = _agent(store)
    _run(agent, FACTS, use_async=use_async)
    value = agent.get_state(CONFIG).values["paging"]
    pages = paging.page_store.list_pages(THREAD)
    assert len(pages) > 4, "the thread was paged"
    assert "doc_freq" not in value and "n_pages" not in value  # the old code wrote both at every step
    assert "beehiv" not in json.dumps(value)  # the common word's stem is in no bookmark, no term map
    sketch = paging.page_store.get_sketch(THREAD)
    assert sketch is not None and sketch.n_pages == len(pages)
    assert sketch.doc_freq["beehiv"] == len(pages)  # on every page
    assert all(sketch.holds(page_number(p.id)) for p in pages)


def test_bookmarks_are_those_the_checkpointed_sketch_gave():
    store = InMemoryStore()
    agent, paging = _agent(store, max_tokens=326)
    _run(agent, FACTS)
    pages = paging.page_store.list_pages(THREAD)
    assert len({p.created_turn for p in pages}) >= 3, "pages formed at several steps"
    assert {p.id: p.bookmark for p in pages} == _replayed_bookmarks(pages)
    # and the sketch matters: with an empty one, the pages' bookmarks would differ
    blind = as_bookmarker(None).bookmark(
        [PageDraft(p.id, p.messages) for p in pages], BookmarkContext(count_text=TokenCounter().count_text)
    )
    assert [b.text for b in blind] != [p.bookmark for p in pages]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request, tmp_path):
    if request.param == "memory":
        return InMemoryStore()
    if request.param == "sqlite":
        conn = sqlite3.connect(str(tmp_path / "pages.sqlite"), check_same_thread=False, isolation_level=None)
        request.addfinalizer(conn.close)
        sqlite_store = SqliteStore(conn)
        sqlite_store.setup()
        return sqlite_store
    return request.getfixturevalue("postgres_store")


def test_forget_and_delete_remove_terms_from_the_store_sketch(store):
    agent, paging = _agent(store)
    _run(agent, [CARD, *FACTS[:10]])
    sketch = paging.page_store.get_sketch(THREAD)
    assert sketch is not None and "quixotrix" in sketch.doc_freq and "4929" in sketch.doc_freq
    pages_before = sketch.n_pages

    paging.page_store.forget(THREAD, "h0", graph=agent)
    after = paging.page_store.get_sketch(THREAD)
    assert after is not None
    assert "quixotrix" not in after.doc_freq and "4929" not in after.doc_freq
    assert after.doc_freq["beehiv"] == sketch.doc_freq["beehiv"] and after.n_pages == pages_before
    paging.page_store.forget(THREAD, "h0", graph=agent)  # idempotent
    assert paging.page_store.get_sketch(THREAD) == after

    paging.page_store.delete_thread(THREAD)
    assert paging.page_store.get_sketch(THREAD) is None
    _run(agent, FACTS, prefix="new")  # the same thread id starts a new sketch, counting only the new pages
    again = paging.page_store.get_sketch(THREAD)
    assert again is not None and "quixotrix" not in again.doc_freq
    assert again.n_pages == len(paging.page_store.list_pages(THREAD)) > 0


def test_an_old_checkpoint_with_doc_freq_moves_its_sketch_to_the_store():
    # an old checkpoint: the channel value carried the sketch (what `page_messages` still writes)
    messages, old = [], None
    for n, text in enumerate(FACTS[:8]):
        messages = merge_messages(messages, [HumanMessage(text, id=f"h{n}")])
        result = page_messages(messages, state=old, max_tokens=150, boundary="fixed_2")
        messages, old = result.apply(messages), result.state.to_value()
    assert old["doc_freq"] and old["n_pages"] > 0
    carried = PagingState.from_value(old).doc_freq
    store = InMemoryStore()
    agent, paging = _agent(store)
    agent.update_state(CONFIG, {"messages": messages, "paging": old})
    _run(agent, FACTS[8:], prefix="new")

    value = agent.get_state(CONFIG).values["paging"]
    assert "doc_freq" not in value
    sketch = paging.page_store.get_sketch(THREAD)
    assert sketch is not None
    formed = [
        p
        for p in paging.page_store.list_pages(THREAD)
        if page_number(p.id) >= PagingState.from_value(old).next["p"]
    ]
    assert formed and sketch.n_pages == old["n_pages"] + len(formed)
    holding = sum("beehives" in " ".join(str(m.content) for m in p.messages) for p in formed)
    assert sketch.doc_freq["beehiv"] == carried["beehiv"] + holding  # counted on from the old counts


def test_a_call_that_forms_no_page_reads_no_sketch_and_a_forming_call_reads_it_once():
    store = _CountingStore()
    agent, _ = _agent(store, max_tokens=20_000)
    _run(agent, FACTS[:3])
    assert store.sketch_reads == 0 and store.sketch_writes == 0  # nothing paged: nothing read

    store = _CountingStore()
    agent, paging = _agent(store)
    _run(agent, FACTS)
    forming = len({p.created_turn for p in paging.page_store.list_pages(THREAD)})
    assert store.sketch_reads == store.sketch_writes == forming


def test_a_retried_step_does_not_count_its_pages_twice():
    store = InMemoryStore()
    agent, paging = _agent(store)
    _run(agent, FACTS[:11])  # the 11th turn forms pages
    before = paging.page_store.get_sketch(THREAD)
    assert before is not None and before.n_pages == len(paging.page_store.list_pages(THREAD)) > 0
    # a retry: the model call runs again on the same state (as after a crash between the commit and
    # the checkpoint): the same pages are formed again, under the same numbers, and not counted again
    history = list(agent.get_state_history(CONFIG))
    parent = next(s for s in history if s.next == ("model",) and s.values["messages"][-1].id == "h10")
    agent.invoke(None, parent.config)
    assert len(paging.page_store.list_pages(THREAD)) == before.n_pages
    assert paging.page_store.get_sketch(THREAD) == before


def test_the_pure_function_still_gives_thread_distinctive_words():
    messages, paging, formed = [], None, []
    for n, text in enumerate(FACTS):
        messages = merge_messages(messages, [HumanMessage(text, id=f"h{n}")])
        result = page_messages(messages, state=paging, max_tokens=150, boundary="fixed_2")
        messages, paging = result.apply(messages), result.state.to_value()
        formed += result.pages
    state = PagingState.from_value(paging)
    assert state.doc_freq["beehiv"] == state.n_pages > 4  # the sketch travels in the state here
    late = formed[len(formed) // 2 :]  # once the sketch has counted a few pages
    assert late
    for page in late:  # its own name, lake and colour first; the words on every page after them
        assert all(any(ch.isdigit() for ch in k) or k in COLOURS for k in page.keywords[:3]), page.keywords


def test_a_sketch_record_round_trips_and_counts_a_page_once():
    sketch = TermSketch()
    sketch.count(3, ["a", "b"])
    sketch.count(4, ["a"])
    sketch.count(3, ["a", "b"])
    assert (sketch.doc_freq, sketch.n_pages, sketch.counted) == ({"a": 2, "b": 1}, 2, [[3, 5]])
    assert TermSketch.from_record(json.loads(json.dumps(sketch.to_record()))) == sketch
    assert ungrouped({"a": 2, "b": 1}) == ungrouped(grouped({"a": 2, "b": 1})) == {"a": 2, "b": 1}


class _CountingStore(InMemoryStore):
    """Counts reads and writes of the sketch record."""

    sketch_reads = 0
    sketch_writes = 0

    def batch(self, ops):
        ops = list(ops)
        key = thread_namespace(THREAD, "meta")
        for op in ops:
            if getattr(op, "namespace", None) == key and getattr(op, "key", None) == "sketch":
                if type(op).__name__ == "GetOp":
                    self.sketch_reads += 1
                else:
                    self.sketch_writes += 1
        return super().batch(ops)
