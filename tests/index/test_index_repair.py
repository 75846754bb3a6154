"""Storage v4 (issue 21) on the search indexes: a cold load never deadlocks, a failed index write is
repaired, each thread's term statistics are its own, and forgotten text leaves the SQLite file.

The conformance part runs on every index (in-process BM25, SQLite FTS5, PostgreSQL); the regression
tests go through the user's path: `create_agent` + `PagingMiddleware` with a scripted model.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import InMemoryBM25Index, Page, PageStore, PagingMiddleware, PagingState
from langmem_paging.core.text import search_terms
from langmem_paging.index.defaults import default_index
from langmem_paging.index.sqlite import COMMON_MIN, SqliteSearchIndex
from langmem_paging.recall.io import Search
from langmem_paging.runtime.thread_io import IndexPages, ThreadIO
from langmem_paging.testing import ScriptedChatModel
from tests.support.backends import sqlite_store
from tests.support.indexes import text_page

FACTS = [f"My neighbour Zarko{i} keeps {i} beehives near Lake Bled{i} since 19{i:02d}." for i in range(24)]
HANG = 60  # seconds: a deadlocked turn fails the test instead of hanging CI


PAGES = [text_page(n + 1, fact, "Noted.") for n, fact in enumerate(FACTS[:6])]
EVERY = {"allow": lambda p: True}


def _found(index, thread: str, query: str) -> list[str]:
    return [h.page_id for h in index.search(thread, query, limit=10, **EVERY)]


# -- conformance: every index ---------------------------------------------------------------------


def test_cold_load_of_an_unknown_thread_reads_a_lazy_page_stream(index):
    read: list[str] = []

    def lazily() -> Iterator[Page]:  # as `PageStore.scan` yields: each read happens during the load
        for page in PAGES:
            read.append(page.id)
            yield page

    assert not index.has("cold") and index.indexed_through("cold") is None
    index.load("cold", lazily())
    assert read == [p.id for p in PAGES] and index.has("cold")
    assert _found(index, "cold", "beehives Bled4")[0] == "p5"


def test_gap_repaired_by_the_next_step_and_by_a_search(index):
    page_store = PageStore(InMemoryStore())
    for page in PAGES:
        page_store.put("t", page)
    io = ThreadIO(page_store, index, "t")
    index.load("t", PAGES[:2])
    # p3's index write failed; the step that forms p4 finds the gap and indexes p3 too
    io.index_pages(IndexPages([PAGES[3]]))
    assert index.indexed_through("t") == 4
    assert _found(index, "t", "beehives Bled2")[0] == "p3"
    # p5 and p6 never reached the index (the process stopped): a search of a branch that owns them reads them
    hits = io.search(Search("beehives Bled5", 10, lambda p: True, newest=6))
    assert hits[0].page_id == "p6" and index.indexed_through("t") == 6


def test_tenant_isolation_of_frequencies(index):
    """One tenant's pages never change another's matches or scores (which terms are too common, IDF)."""
    b_pages = [
        text_page(1, "We adopted a greyhound named Comet.", "Lovely."),
        text_page(2, "Pottery class on Tuesday evenings.", "Sounds fun."),
        text_page(3, "Comet the greyhound chewed my pottery.", "Oh no."),
    ]
    index.load("b", b_pages)
    index.load("a", [])
    query = "greyhound pottery class"
    before = index.search("b", query, limit=10, **EVERY)
    # enough of thread A's messages hold the word that it is "too common" file-wide
    many = [
        text_page(n, *[f"Another greyhound walked by, number {n}-{k}." for k in range(10)])
        for n in range(1, COMMON_MIN // 10 + 60)
    ]
    index.add("a", many)
    after = index.search("b", query, limit=10, **EVERY)
    assert [(h.page_id, h.index) for h in after] == [(h.page_id, h.index) for h in before]
    assert [h.score for h in after] == pytest.approx([h.score for h in before])
    assert index.score("b", query, ["a greyhound"]) == pytest.approx(index.score("b", query, ["a greyhound"]))


# -- the user's path: create_agent + PagingMiddleware ---------------------------------------------


def _recall_call(query: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "recall", "args": {"query": query}, "id": "q1"}])


def _within(seconds: float, work) -> object:
    """Run `work` in a thread; fail (instead of hanging) if it does not finish."""
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["value"] = work()
        except BaseException as error:  # noqa: BLE001 - re-raised in the test's thread
            out["error"] = error

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"the turn did not finish within {seconds} s (a deadlock)"
    if "error" in out:
        raise out["error"]  # type: ignore[misc]
    return out["value"]


def _turns(agent, thread: str, texts: list[str], *, mode: str = "sync") -> dict:
    config = {"configurable": {"thread_id": thread}}
    state: dict = {}
    for text in texts:
        state = (
            agent.invoke({"messages": [text]}, config)
            if mode == "sync"
            else asyncio.run(agent.ainvoke({"messages": [text]}, config))
        )
    return state


def test_search_of_pages_stored_before_the_sqlite_index_knew_the_thread_does_not_deadlock(tmp_path):
    """Issue 21 item 4: `SqliteSearchIndex.load` held the store's lock while reading the store."""
    store = sqlite_store(str(tmp_path / "pages.db"))
    before = ScriptedChatModel(responses=["Noted."] * 12)
    paging = PagingMiddleware(max_tokens=476, boundary="fixed_4", store=store, index=InMemoryBM25Index())
    agent = create_agent(
        before, tools=[], middleware=[paging], checkpointer=(saver := InMemorySaver()), store=store
    )
    _turns(
        agent, "old", FACTS[:12]
    )  # pages stored by an agent on another index (or `import`, an old version)
    model = ScriptedChatModel(responses=[_recall_call("beehives Lake Bled3"), "Three."])
    paging = PagingMiddleware(max_tokens=476, boundary="fixed_4", store=store)  # the file's own FTS5 index
    index = paging.pager.index_for(paging.page_store)
    assert isinstance(index, SqliteSearchIndex) and not index.has("old")
    agent = create_agent(model, tools=[], middleware=[paging], checkpointer=saver, store=store)
    state = _within(HANG, lambda: _turns(agent, "old", ["How many beehives near Lake Bled3?"]))
    tool_message = next(m for m in state["messages"] if isinstance(m, ToolMessage))  # type: ignore[index]
    assert FACTS[3] in tool_message.content


def test_search_of_pages_stored_before_the_index_knew_the_thread_on_async_sqlite(tmp_path):
    """The same on `AsyncSqliteStore` (the index on its own connection to the file)."""
    from langgraph.store.sqlite.aio import AsyncSqliteStore

    async def scenario() -> str:
        async with AsyncSqliteStore.from_conn_string(str(tmp_path / "pages.db")) as store:
            await store.setup()
            paging = PagingMiddleware(
                max_tokens=476, boundary="fixed_4", store=store, index=InMemoryBM25Index()
            )
            saver = InMemorySaver()
            agent = create_agent(
                ScriptedChatModel(responses=["Noted."] * 12),
                tools=[],
                middleware=[paging],
                checkpointer=saver,
                store=store,
            )
            config = {"configurable": {"thread_id": "old"}}
            for fact in FACTS[:12]:
                await agent.ainvoke({"messages": [fact]}, config)
            index = SqliteSearchIndex(str(tmp_path / "pages.db"))  # knows no thread yet
            paging = PagingMiddleware(max_tokens=476, boundary="fixed_4", store=store, index=index)
            model = ScriptedChatModel(responses=[_recall_call("beehives Lake Bled3"), "Three."])
            agent = create_agent(model, tools=[], middleware=[paging], checkpointer=saver, store=store)
            state = await asyncio.wait_for(
                agent.ainvoke({"messages": ["How many beehives near Lake Bled3?"]}, config), HANG
            )
            return next(m for m in state["messages"] if isinstance(m, ToolMessage)).content

    assert FACTS[3] in _within(HANG + 5, lambda: asyncio.run(scenario()))  # type: ignore[operator]


class FlakyIndex(SqliteSearchIndex):
    """An FTS5 index in the store's file whose `add` fails at chosen calls (``database is locked`` past the
    timeout)."""

    fail_adds: set[int] = set()
    adds = 0

    def add(self, thread_id: str, pages) -> None:
        type(self).adds += 1
        if type(self).adds in self.fail_adds:
            raise sqlite3.OperationalError("database is locked")
        super().add(thread_id, pages)


READER = """
import json, sqlite3, sys
from langgraph.store.sqlite import SqliteStore
from langmem_paging import PagingConfig, PageStore
from langmem_paging.runtime.pager import Pager
store = SqliteStore(sqlite3.connect(sys.argv[1], check_same_thread=False, isolation_level=None))
pager = Pager(PagingConfig(max_tokens=3000, boundary="fixed_2"), PageStore(store))
state = json.loads(open(sys.argv[2]).read())
print(json.dumps([pager.recall("t", state, query=query).content for query in json.loads(sys.argv[3])]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("failed", ["a middle step", "the last step"])
def test_pages_whose_index_write_failed_are_found_by_search_later(tmp_path, failed):
    """Issue 21 item 5: under `on_store_error="continue"` a failed index write was never repaired."""
    path = str(tmp_path / "pages.db")
    store = sqlite_store(path)
    FlakyIndex.adds, FlakyIndex.fail_adds = 0, {2} if failed == "a middle step" else set()
    # its own connection to the file: written after the records, in a transaction of its own (an index
    # on the store's connection writes with the records: a failure there is the store's, nothing to repair)
    index = FlakyIndex(path)
    paging = PagingMiddleware(
        max_tokens=196, boundary="fixed_2", store=store, index=index, on_store_error="continue"
    )
    agent = create_agent(
        ScriptedChatModel(responses=["Noted."] * 40),
        tools=[],
        middleware=[paging],
        checkpointer=InMemorySaver(),
        store=store,
    )
    config = {"configurable": {"thread_id": "t"}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for fact in FACTS[:14]:
            state = agent.invoke({"messages": [fact]}, config)
        if failed == "the last step":  # the process stops right after an index write failed
            FlakyIndex.fail_adds = {FlakyIndex.adds + 1}
            for fact in FACTS[14:]:
                state = agent.invoke({"messages": [fact]}, config)
                if FlakyIndex.adds in FlakyIndex.fail_adds:
                    break
    assert any("not searchable" in str(w.message) for w in caught)
    pages = paging.page_store.list_pages("t")
    assert len(pages) >= 4 and PagingState.from_value(state["paging"]).next["p"] - 1 == len(pages)
    fresh = SqliteSearchIndex(path)  # another process's view of the file
    assert (fresh.indexed_through("t") == len(pages)) is (
        failed == "a middle step"
    )  # later steps filled the gap
    state_file = tmp_path / "state.json"
    state_file.write_text(json.dumps(state["paging"]))
    facts = [next(str(m.content) for m in page.messages if "Zarko" in str(m.content)) for page in pages]
    queries = [f"beehives Lake {fact.split('Lake ')[1].split(' ')[0]}" for fact in facts]
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(READER), path, str(state_file), json.dumps(queries)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for page, fact, content in zip(pages, facts, json.loads(done.stdout), strict=True):
        assert fact in content, f"{page.id} is not found by search in a fresh process"
    assert fresh.indexed_through("t") == len(pages)


# -- bytes gone: forget and delete leave nothing in the SQLite file --------------------------------

SECRET = "Quixotrix vexbelt gorplanium zumbrake flindow maxyrelt obrunel kwistaff plomdrin yarvexa"
SECRET_WORDS = SECRET.lower().split()


def _file_bytes(path: str, conn: sqlite3.Connection) -> bytes:
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = Path(path + "-wal")
    return (Path(path).read_bytes() + (wal.read_bytes() if wal.exists() else b"")).lower()


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_forgotten_text_is_gone_from_the_sqlite_files_bytes(tmp_path, journal):
    """Issue 21 item 10: the store's old record and the FTS5 rows stayed in the file's free pages and
    segments until a vacuum."""
    path = str(tmp_path / "pages.db")
    store = sqlite_store(path)
    store.conn.execute(f"PRAGMA journal_mode={journal}")
    store.conn.execute("PRAGMA secure_delete = OFF")  # SQLite's default (Debian builds turn it on)
    paging = PagingMiddleware(max_tokens=476, boundary="fixed_4", store=store)
    agent = create_agent(
        ScriptedChatModel(responses=["Noted."] * 30),
        tools=[],
        middleware=[paging],
        checkpointer=InMemorySaver(),
        store=store,
    )
    texts = [*FACTS[:3], f"My card label is {SECRET} 4929-1234", *FACTS[3:12]]
    _turns(agent, "t", texts)
    secret_id = next(
        m.id for p in paging.page_store.list_pages("t") for m in p.messages if SECRET in str(m.content)
    )
    stems = " ".join(search_terms(SECRET)).encode()  # the FTS5 row's body
    data = _file_bytes(path, store.conn)
    assert SECRET.lower().encode() in data and stems in data  # stored and indexed
    changed = paging.page_store.forget("t", secret_id, index=default_index(store))
    assert changed
    data = _file_bytes(path, store.conn)
    assert SECRET.lower().encode() not in data, "the forgotten message is still in the file's bytes"
    assert stems not in data, "the forgotten message's FTS5 row is still in the file's bytes"
    # single words: those the page's bookmark and keywords still hold are the lifecycle's (issue 21 item 1)
    pages, clusters = paging.page_store.list_pages("t"), paging.page_store.list_clusters("t")
    marks = json.dumps([[p.bookmark, p.keywords] for p in pages] + [n.to_dict() for n in clusters]).lower()
    for word in [w for w in search_terms(SECRET) if w not in marks]:
        assert word.encode() not in data, f"{word!r} is still in the file's bytes"
    assert default_index(store).search("t", SECRET, limit=5, **EVERY) == []


def test_a_forgotten_messages_terms_are_gone_from_the_index_files_bytes(tmp_path):
    """FTS5 keeps a deleted row's terms in its segments (a delete adds a marker): they are purged."""
    path = str(tmp_path / "index.db")
    index = SqliteSearchIndex(path)
    secret = text_page(1, f"My card label is {SECRET}.", "Noted.")
    index.load("t", [secret, *PAGES[1:]])
    raw = sqlite3.connect(path)
    assert all(w.encode() in _file_bytes(path, raw) for w in search_terms(SECRET))
    index.update("t", [text_page(1, "[forgotten]", "Noted.")])
    data = _file_bytes(path, raw)
    assert [w for w in search_terms(SECRET) if w.encode() in data] == []
    assert index.search("t", SECRET, limit=5, **EVERY) == []
    assert _found(index, "t", "beehives Bled2")[0] == "p3"


def test_a_dropped_threads_terms_are_gone_from_the_index_files_bytes(tmp_path):
    path = str(tmp_path / "index.db")
    index = SqliteSearchIndex(path)
    index.load("t", [text_page(1, f"My card label is {SECRET}.", "Noted."), *PAGES[1:]])
    index.load("u", PAGES)
    raw = sqlite3.connect(path)
    assert all(w.encode() in _file_bytes(path, raw) for w in search_terms(SECRET))
    index.drop("t")
    data = _file_bytes(path, raw)
    assert [w for w in search_terms(SECRET) if w.encode() in data] == []
    assert _found(index, "u", "beehives Bled2")[0] == "p3"  # the other thread is intact
