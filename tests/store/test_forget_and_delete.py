"""Storage v4, the page lifecycle (issue 21, items 1-3): forget and delete mean gone, on every store,
through the user's path (create_agent + PagingMiddleware with a scripted model; the CLI).

Before: `forget` left the card number in the page bookmark, the cluster bookmarks, the keyword sketch,
the state and the next prompt; the CLI's `forget` missed the SQLite FTS5 rows; `delete_thread` left
every index row, so a new conversation under the same id was never searchable and the deleted words
still matched it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langmem_paging import PagingMiddleware
from langmem_paging.cli import main as cli
from langmem_paging.core.errors import PageStoreError
from langmem_paging.index.sqlite import SqliteSearchIndex
from langmem_paging.ops.where import where_text
from langmem_paging.storage.page_store import PageStore
from langmem_paging.testing import ScriptedChatModel
from tests.support.backends import DATABASE_OF
from tests.support.indexes import empty_postgres_index

SECRET = "Quixotrix"
CARD = f"My card is 4929 1234 5678 9012, under the name {SECRET}. Keep it."
FACTS = [f"Note {i}: my neighbour Zarko{i} keeps {i + 2} beehives near Lake Bled{i}." for i in range(16)]
THREAD = "privacy"
CONFIG = {"configurable": {"thread_id": THREAD}}


def _search(query: str, call: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "recall", "args": {"query": query}, "id": call}])


def _recall(page_id: str, call: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "recall", "args": {"page_ids": [page_id]}, "id": call}])


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def backend(request, tmp_path):
    """(store, index given to the middleware or None) for each store the issue names."""
    if request.param == "memory":
        return InMemoryStore(), None
    if request.param == "sqlite":
        conn = sqlite3.connect(str(tmp_path / "pages.sqlite"), check_same_thread=False, isolation_level=None)
        request.addfinalizer(conn.close)
        store = SqliteStore(conn)
        store.setup()
        return store, None
    store = request.getfixturevalue("postgres_store")
    index = empty_postgres_index(DATABASE_OF[store])
    request.addfinalizer(index.close)
    return store, index


def _agent(store, index, responses, checkpointer=None):
    paging = PagingMiddleware(max_tokens=476, boundary="fixed_2", store=store, index=index)
    model = ScriptedChatModel(responses=responses)
    agent = create_agent(
        model, middleware=[paging], store=store, checkpointer=checkpointer or InMemorySaver()
    )
    return agent, paging, model


def _card_page(paging) -> str:
    holders = [p.id for p in paging.page_store.list_pages(THREAD) if any(m.id == "card" for m in p.messages)]
    assert holders, "the card message was paged out"
    return holders[0]


def _search_hits(paging, query):
    """A search as the recall tool runs it: a thread the index does not know yet is loaded first."""
    index = paging.pager.index_for(paging.page_store)
    if not index.has(THREAD):
        index.load(THREAD, paging.page_store.list_pages(THREAD))
    return index.search(THREAD, query, limit=5, allow=lambda p: True)


def _places(paging, agent, text):
    values = agent.get_state(CONFIG).values
    index = paging.pager.index_for(paging.page_store)
    return where_text(
        paging.page_store,
        THREAD,
        text,
        index=index,
        paging=values.get("paging"),
        messages=values.get("messages", []),
    )


def test_forget_removes_the_card_from_records_index_bookmarks_sketch_state_and_the_next_prompt(backend):
    store, index = backend
    query = "4929 card Quixotrix"
    script = ["Noted."] * (1 + len(FACTS)) + [_search(query, "s1"), "None.", _recall("p1", "r1"), "Done."]
    agent, paging, model = _agent(store, index, script)
    agent.invoke({"messages": [HumanMessage(CARD, id="card")]}, CONFIG)
    for fact in FACTS:
        agent.invoke({"messages": [fact]}, CONFIG)
    page_id = _card_page(paging)
    before = {p.place for p in _places(paging, agent, "4929")}
    # the old code left these behind: the test fails on it
    assert {"page bookmark", "index row", "store sketch"} <= before, before
    assert any(SECRET in p.bookmark for p in paging.page_store.list_clusters(THREAD)), (
        "a cluster bookmark held it"
    )

    assert paging.page_store.forget(THREAD, "card", index=index, graph=agent) == [page_id]

    for word in ("4929", "1234", SECRET):
        assert _places(paging, agent, word) == [], word
    page = paging.page_store.get(THREAD, page_id)
    assert not any("4929" in str(m.content) for m in page.messages)  # recall by id
    values = agent.invoke({"messages": ["What was my card number?"]}, CONFIG)
    search = next(m for m in values["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "s1")
    shown = search.content.replace(query, "")  # (the result names the query the model sent)
    assert "4929" not in shown and SECRET not in shown
    for prompt in model.prompts[-2:]:  # the next prompts: bookmarks, cluster bookmarks, recall results
        texts = [str(m.content).replace(query, "") for m in prompt]
        assert not any("4929" in t or SECRET in t for t in texts), texts
    # the rest of the thread is untouched: every fact still recalled by search
    assert _search_hits(paging, "Zarko5 beehives")


def test_forget_run_twice_converges(backend):
    store, index = backend
    agent, paging, _ = _agent(store, index, ["Noted."] * (1 + len(FACTS)))
    agent.invoke({"messages": [HumanMessage(CARD, id="card")]}, CONFIG)
    for fact in FACTS:
        agent.invoke({"messages": [fact]}, CONFIG)
    first = paging.page_store.forget(THREAD, "card", index=index, graph=agent)
    records = [p.to_dict() for p in paging.page_store.list_pages(THREAD)]
    state = agent.get_state(CONFIG).values["paging"]
    assert paging.page_store.forget(THREAD, "card", index=index, graph=agent) == first
    assert [p.to_dict() for p in paging.page_store.list_pages(THREAD)] == records
    assert agent.get_state(CONFIG).values["paging"] == state


def test_delete_then_reuse_of_the_thread_id_is_searchable_and_never_matches_the_deleted_words(backend):
    store, index = backend
    agent, paging, _ = _agent(store, index, ["Noted."] * (1 + len(FACTS)))
    agent.invoke({"messages": [HumanMessage(CARD, id="card")]}, CONFIG)
    for fact in FACTS:
        agent.invoke({"messages": [fact]}, CONFIG)
    assert _search_hits(paging, "Zarko3")  # the index knows the thread

    assert paging.page_store.delete_thread(THREAD, index=index) > 0

    later = [f"Day {i}: the ferry to Vis{i} leaves at {i + 6} from pier Okrug{i}." for i in range(16)]
    agent2, paging2, _ = _agent(store, index, ["Noted."] * len(later))  # new checkpoints: a new conversation
    for text in later:
        agent2.invoke({"messages": [text]}, CONFIG)
    assert paging2.page_store.list_pages(THREAD), "the new conversation was paged"
    assert _search_hits(paging2, "Okrug2 ferry"), "the new conversation is searchable"
    for old in ("Zarko3", "4929", SECRET):
        assert _search_hits(paging2, old) == [], old


def test_async_delete_wraps_a_claims_failure_as_delete_does(monkeypatch):
    from langmem_paging.storage import page_store as store_module

    class Broken:
        def drop(self, thread_id):
            raise RuntimeError("claims table gone")

        async def adrop(self, thread_id):
            raise RuntimeError("claims table gone")

    monkeypatch.setattr(store_module, "claims_for", lambda store: Broken())
    pages = PageStore(InMemoryStore())
    with pytest.raises(PageStoreError, match="claims table gone"):
        pages.delete_thread("t")
    with pytest.raises(PageStoreError, match="claims table gone"):
        asyncio.run(pages.adelete_thread("t"))


def _sqlite_thread(path, responses):
    conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
    saver_conn = sqlite3.connect(str(path), check_same_thread=False)
    store = SqliteStore(conn)
    store.setup()
    saver = SqliteSaver(saver_conn)
    agent, paging, model = _agent(store, None, responses, checkpointer=saver)
    return conn, saver_conn, agent, paging, model


def test_cli_forget_reaches_the_sqlite_fts_rows_the_bookmarks_and_the_checkpointed_state(tmp_path, capsys):
    path = tmp_path / "thread.sqlite"
    conn, saver_conn, agent, paging, _ = _sqlite_thread(path, ["Noted."] * (1 + len(FACTS)))
    with closing(conn), closing(saver_conn):
        agent.invoke({"messages": [HumanMessage(CARD, id="card")]}, CONFIG)
        for fact in FACTS:
            agent.invoke({"messages": [fact]}, CONFIG)
        assert isinstance(paging.pager.index_for(paging.page_store), SqliteSearchIndex)
    uri = f"sqlite:///{path}"
    assert cli(["where", THREAD, "--text", "4929", "--store", uri]) == 1
    listed = capsys.readouterr().out
    assert "index row" in listed and "store sketch" in listed and "page bookmark" in listed
    assert cli(["forget", THREAD, "card", "--store", uri, "--yes"]) == 0
    capsys.readouterr()
    for word in ("4929", SECRET):
        assert cli(["where", THREAD, "--text", word, "--store", uri]) == 0, capsys.readouterr().out
    with closing(sqlite3.connect(str(path))) as raw:  # the FTS5 rows themselves, not the index's opinion
        assert raw.execute("SELECT count(*) FROM langmem_paging_fts WHERE body LIKE '%4929%'").fetchone() == (
            0,
        )
    # the agent goes on from the rewritten checkpoint; its next prompt holds no trace
    script = ["Noted."] * (1 + len(FACTS)) + ["Sure."]
    conn, saver_conn, agent, paging, model = _sqlite_thread(path, script)
    with closing(conn), closing(saver_conn):
        model.prompts.extend(
            [[]] * (1 + len(FACTS))
        )  # (the script's first answers were used by the first run)
        agent.invoke({"messages": ["Anything else?"]}, CONFIG)
        assert not any("4929" in str(m.content) or SECRET in str(m.content) for m in model.prompts[-1])
    assert cli(["verify", THREAD, "--store", uri]) == 0


@pytest.mark.slow
def test_cli_delete_drops_the_fts_rows_so_a_reused_id_never_matches_the_deleted_words(tmp_path, capsys):
    path = tmp_path / "thread.sqlite"
    conn, saver_conn, agent, paging, _ = _sqlite_thread(path, ["Noted."] * (1 + len(FACTS)))
    with closing(conn), closing(saver_conn):
        agent.invoke({"messages": [HumanMessage(CARD, id="card")]}, CONFIG)
        for fact in FACTS:
            agent.invoke({"messages": [fact]}, CONFIG)
    uri = f"sqlite:///{path}"
    assert cli(["delete", THREAD, "--store", uri, "--yes", "--with-checkpoints"]) == 0
    with closing(sqlite3.connect(str(path))) as raw:
        assert raw.execute(
            "SELECT count(*) FROM langmem_paging_fts WHERE thread_id = ?", (THREAD,)
        ).fetchone() == (0,)
    later = [f"Day {i}: the ferry to Vis{i} leaves at {i + 6} from pier Okrug{i}." for i in range(16)]
    conn, saver_conn, agent, paging, _ = _sqlite_thread(path, ["Noted."] * len(later))
    with closing(conn), closing(saver_conn):
        for text in later:
            agent.invoke({"messages": [text]}, CONFIG)
        assert _search_hits(paging, "Okrug2 ferry")
        assert _search_hits(paging, "Zarko3") == []


def test_cli_forget_and_delete_reach_the_postgres_passages(postgres_store, capsys):
    uri = DATABASE_OF[postgres_store]
    index = empty_postgres_index(uri)  # the default table, which the CLI finds in the store's database
    try:
        agent, paging, _ = _agent(postgres_store, index, ["Noted."] * (1 + len(FACTS)))
        agent.invoke({"messages": [HumanMessage(CARD, id="card")]}, CONFIG)
        for fact in FACTS:
            agent.invoke({"messages": [fact]}, CONFIG)

        def passages(word: str) -> int:
            with index._connection() as conn:
                return conn.execute(
                    f"SELECT count(*) FROM {index.table} WHERE thread_id = %s AND body LIKE %s",
                    (THREAD, f"%{word}%"),
                ).fetchone()[0]

        assert passages("4929") > 0
        assert cli(["forget", THREAD, "card", "--store", uri, "--checkpoints", "none", "--yes"]) == 0
        assert passages("4929") == 0 and passages(SECRET) == 0
        assert index.search(THREAD, SECRET, limit=5, allow=lambda p: True) == []
        assert cli(["where", THREAD, "--text", "4929", "--store", uri, "--checkpoints", "none"]) == 0
        assert passages("Zarko3") > 0
        assert cli(["delete", THREAD, "--store", uri, "--yes"]) == 0
        assert passages("") == 0
    finally:
        index.close()
    capsys.readouterr()


def test_async_forget_in_view_mode_scrubs_the_skeleton_the_next_prompt_is_rendered_from():
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=600, boundary="fixed_2", store=store, mode="view")
    model = ScriptedChatModel(responses=["Noted."] * (2 + len(FACTS)))
    agent = create_agent(model, middleware=[paging], store=store, checkpointer=InMemorySaver())

    async def scenario() -> None:
        await agent.ainvoke({"messages": [HumanMessage(CARD, id="card")]}, CONFIG)
        for fact in FACTS:
            await agent.ainvoke({"messages": [fact]}, CONFIG)
        skeleton = (await agent.aget_state(CONFIG)).values["paging"]["skeleton"]
        assert any(SECRET in str(entry) for entry in skeleton), "a bookmark in the skeleton held it"
        assert await paging.page_store.aforget(THREAD, "card", graph=agent) == [_card_page(paging)]
        values = (await agent.aget_state(CONFIG)).values
        assert not any(SECRET in str(entry) or "4929" in str(entry) for entry in values["paging"]["skeleton"])
        assert _places(paging, agent, SECRET) == []
        await agent.ainvoke({"messages": ["Anything else?"]}, CONFIG)

    asyncio.run(scenario())
    assert not any("4929" in str(m.content) or SECRET in str(m.content) for m in model.prompts[-1])


@pytest.mark.parametrize("side", ["sync", "async"])
def test_forget_with_only_a_checkpointer_corrects_the_latest_checkpoint(side):
    """The command line's path: no graph, one new checkpoint on top of the latest (both drivers)."""
    store, saver = InMemoryStore(), InMemorySaver()
    agent, paging, _ = _agent(store, None, ["Noted."] * (1 + len(FACTS)), checkpointer=saver)
    agent.invoke({"messages": [HumanMessage(CARD, id="card")]}, CONFIG)
    for fact in FACTS:
        agent.invoke({"messages": [fact]}, CONFIG)
    assert _places(paging, agent, SECRET), "the state showed it"
    before = agent.get_state(CONFIG).config["configurable"]["checkpoint_id"]
    if side == "sync":
        changed = paging.page_store.forget(THREAD, "card", checkpointer=saver)
    else:
        changed = asyncio.run(paging.page_store.aforget(THREAD, "card", checkpointer=saver))
    assert changed == [_card_page(paging)]
    assert agent.get_state(CONFIG).config["configurable"]["checkpoint_id"] != before
    assert _places(paging, agent, SECRET) == []
