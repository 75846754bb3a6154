"""Storage v4 on Postgres (issue 21, items 6-8): any text round-trips, the same page added by two
workers is idempotent, and each thread's document frequencies are its own. The odd-text and
concurrent-add cases run on every index (memory, SQLite, Postgres)."""

from __future__ import annotations

import threading

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langmem_paging import PageStore, PagingMiddleware
from langmem_paging.core.records import Page
from langmem_paging.index.base import InMemoryBM25Index
from langmem_paging.index.sqlite import SqliteSearchIndex
from langmem_paging.testing import ScriptedChatModel

ODD = "bin\x00ary \x00\x00 zebra\\0 back\\slash \ud800 lone \udfff tail \ue000 private \x01\x1f ctl é 🦓"
"""NUL (JSONB and text refuse it), lone surrogates (not UTF-8), what an escape scheme might use itself
(a backslash before 0, private use), control characters, accents, an astral character."""
AGENT_ODD = ODD.replace("\ud800", "").replace("\udfff", "")
"""What reaches the library through an agent: LangGraph's checkpoint serializer already turns a lone
surrogate into ``?`` before any middleware sees the message."""


def _page(n: int, text: str, mid: str | None = None) -> Page:
    return Page(
        id=f"p{n}",
        messages=[HumanMessage(text, id=mid or f"m{n}"), AIMessage(f"noted {n}", id=f"a{n}")],
        bookmark=f"[p{n}:x]",
        keywords=["x"],
        token_count=10,
        boundary="fixed_2",
        created_turn=n,
    )


@pytest.fixture
def postgres_index(postgres_uri):
    from langmem_paging.index.postgres import PostgresSearchIndex
    from tests.support.postgres_server import fresh_database

    index = PostgresSearchIndex(fresh_database(postgres_uri, "index_v4"))
    yield index
    index.close()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def any_index(request):
    if request.param == "memory":
        return InMemoryBM25Index()
    if request.param == "sqlite":
        return SqliteSearchIndex(":memory:")
    return request.getfixturevalue("postgres_index")


def test_odd_characters_round_trip_exactly_through_every_store(base_store):
    pages = PageStore(base_store)
    page = _page(1, ODD, mid=f"id-{ODD}")
    page.messages[1].additional_kwargs[f"key {ODD}"] = [ODD, {"nested": ODD}]
    page.features["terms"] = {ODD: 1.0}
    pages.put("t", page)
    back = pages.get("t", "p1")
    assert back is not None and back.messages == page.messages and back.features == page.features
    assert back.to_dict() == page.to_dict()
    plain = _page(2, "plain \\0 text")  # nothing refused: stored as it is, backslashes untouched
    assert plain.to_dict()["messages"][0]["data"]["content"] == "plain \\0 text"
    pages.put("t", plain)
    assert pages.get("t", "p2").messages == plain.messages


def test_odd_characters_are_indexed_and_searchable_on_every_index(any_index):
    pages = [_page(1, f"{ODD} quokka"), _page(2, "plain words about lanterns")]
    any_index.load("t", pages)
    assert [h.page_id for h in any_index.search("t", "quokka", limit=5, allow=lambda p: True)] == ["p1"]
    assert [h.page_id for h in any_index.search("t", "zebra", limit=5, allow=lambda p: True)] == ["p1"]
    odd_query = any_index.search("t", f"lanterns {ODD}", limit=5, allow=lambda p: True)  # no error either
    assert {h.page_id for h in odd_query} == {"p1", "p2"}


def test_the_same_page_added_twice_is_indexed_once_on_every_index(any_index):
    any_index.load("t", [_page(1, "first words")])
    page = _page(2, "the walrus sang")
    any_index.add("t", [page])
    any_index.add("t", [page])
    hits = any_index.search("t", "walrus", limit=10, allow=lambda p: True)
    assert [(h.page_id, h.index) for h in hits] == [("p2", 0)]
    again = _page(3, "the walrus hummed")
    any_index.add("t", [page, again, again])  # one call, a page given twice, one indexed already
    hits = any_index.search("t", "walrus", limit=10, allow=lambda p: True)
    assert sorted((h.page_id, h.index) for h in hits) == [("p2", 0), ("p3", 0)]
    # each message counted once in the thread's statistics: scored as a thread loaded with them once
    any_index.load("u", [_page(1, "first words"), page, again])
    assert any_index.score("t", "walrus sang", ["walrus sang"]) == any_index.score(
        "u", "walrus sang", ["walrus sang"]
    )


def test_two_connections_adding_the_same_pages_at_once_neither_fails(postgres_uri):
    from langmem_paging.index.postgres import PostgresSearchIndex
    from tests.support.postgres_server import fresh_database

    uri = fresh_database(postgres_uri, "index_v4_concurrent")
    workers = [PostgresSearchIndex(uri), PostgresSearchIndex(uri)]
    pages = [_page(n, f"walrus number {n} sang") for n in range(1, 41)]
    errors: list[BaseException] = []
    start = threading.Barrier(len(workers))

    def work(index):
        try:
            for k in range(0, len(pages), 2):  # page by page, as workers stepping one thread form them
                start.wait(30)  # both at once: the race two processes forming one page run
                index.add("t", pages[k : k + 2])
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        assert errors == []
        hits = workers[0].search("t", "walrus", limit=200, allow=lambda p: True)
        assert sorted((h.page_id, h.index) for h in hits) == sorted((p.id, 0) for p in pages)
        assert workers[1].document_frequencies("t", ["walrus", "noted"]) == {"walrus": 40, "note": 40}
    finally:
        for index in workers:
            index.close()


def test_a_threads_common_words_do_not_depend_on_another_thread(postgres_index):
    """A word too common in another tenant's thread (above `COMMON_MIN` passages) still matches here."""
    from langmem_paging.index.postgres import COMMON_MIN

    noisy = [
        Page(
            id=f"p{n}",
            messages=[HumanMessage(f"ferret {n}", id=f"h{n}"), AIMessage(f"ferret {n}", id=f"a{n}")],
            bookmark="[x]",
            keywords=[],
            token_count=4,
            boundary="fixed_2",
            created_turn=n,
        )
        for n in range(1, COMMON_MIN // 2 + 101)
    ]
    postgres_index.load("noisy", noisy)
    postgres_index.load("quiet", [_page(1, "a ferret slept"), _page(2, "zebra stripes"), _page(3, "otters")])
    hits = postgres_index.search("quiet", "ferret zebra", limit=5, allow=lambda p: True)
    assert {h.page_id for h in hits} == {"p1", "p2"}
    assert postgres_index.document_frequencies("noisy", ["ferret"]) == {"ferret": 2 * len(noisy)}
    assert postgres_index.document_frequencies("quiet", ["ferret", "zebra", "otters"]) == {
        "ferret": 1,
        "zebra": 1,
        "otter": 1,
    }
    postgres_index.drop("noisy")
    assert postgres_index.document_frequencies("noisy", ["ferret"]) == {}


def test_common_words_of_the_thread_itself_are_left_out_while_rarer_ones_remain(postgres_index):
    from langmem_paging.index.postgres import COMMON_MIN

    pages = [_page(n, f"ferret {n}") for n in range(1, COMMON_MIN + 101)]
    pages.append(_page(len(pages) + 1, "ferret and zebra"))
    postgres_index.load("t", pages)
    both = postgres_index.search("t", "ferret zebra", limit=10, allow=lambda p: True)
    assert [h.page_id for h in both] == [pages[-1].id]  # only the rare word's passages are candidates
    alone = postgres_index.search("t", "ferret", limit=3, allow=lambda p: True)
    assert len(alone) == 3  # the rarest word is always kept


def test_forget_leaves_no_frequency_of_the_forgotten_word(postgres_index):
    postgres_index.load("t", [_page(1, "card 4929 quixotrix"), _page(2, "quixotrix again")])
    postgres_index.update("t", [_page(1, "[forgotten]")])
    assert postgres_index.document_frequencies("t", ["4929", "quixotrix", "card"]) == {"quixotrix": 1}
    assert postgres_index.search("t", "4929", limit=5, allow=lambda p: True) == []


def test_a_message_holding_nul_pages_out_later_turns_succeed_and_recall_is_exact(postgres_store):
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    paging = PagingMiddleware(max_tokens=1000, boundary="fixed_2", store=postgres_store)
    model = ScriptedChatModel(responses=["Noted."] * 40)
    agent = create_agent(model, middleware=[paging], store=postgres_store, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "nul"}}
    pasted = f"Here is the dump: {AGENT_ODD} end of dump."
    agent.invoke({"messages": [HumanMessage(pasted, id="pasted")]}, config)
    for turn in range(12):
        fact = f"Turn {turn}: Zarko{turn} keeps {turn} beehives near Lake Bled{turn}. " * 5
        agent.invoke({"messages": [fact]}, config)  # each turn succeeds (raises otherwise)
    page_id = next(
        p.id for p in paging.page_store.list_pages("nul") if any(m.id == "pasted" for m in p.messages)
    )
    stored = next(m for m in paging.page_store.get("nul", page_id).messages if m.id == "pasted")
    assert stored.content == pasted

    at = len(model.prompts)
    model.responses[at:at] = [
        AIMessage("", tool_calls=[{"name": "recall", "args": {"page_ids": [page_id]}, "id": "r1"}]),
        "ok",
    ]
    state = agent.invoke({"messages": ["What was in the dump?"]}, config)
    result = next(m for m in state["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "r1")
    assert pasted in result.content


def test_a_table_an_older_version_made_gets_its_frequencies_and_its_search(postgres_uri):
    import psycopg

    from langmem_paging.index.postgres import PostgresSearchIndex
    from tests.support.postgres_server import fresh_database

    uri = fresh_database(postgres_uri, "index_v4_upgrade")
    old = PostgresSearchIndex(uri)
    old.load("t", [_page(1, "walrus walrus"), _page(2, "walrus and zebra")])
    expected = old.document_frequencies("t", ["walrus", "zebra", "noted"])
    old.close()
    with psycopg.connect(uri, autocommit=True) as conn:  # what the previous release left behind
        conn.execute("DROP TABLE langmem_paging_passages_terms")
        conn.execute("DROP FUNCTION langmem_paging_passages_search")
        conn.execute("ALTER INDEX langmem_paging_passages_tsv SET (fastupdate = on)")
    new = PostgresSearchIndex(uri)
    try:
        assert (
            new.document_frequencies("t", ["walrus", "zebra", "noted"])
            == expected
            == {"walrus": 2, "zebra": 1, "note": 2}
        )
        assert [h.page_id for h in new.search("t", "zebra", limit=5, allow=lambda p: True)] == ["p2"]
        with psycopg.connect(uri) as conn:
            options = conn.execute(
                "SELECT reloptions FROM pg_class WHERE relname = 'langmem_paging_passages_tsv'"
            )
            assert options.fetchone()[0] == ["fastupdate=off"]
    finally:
        new.close()


# -- the index repairs itself (indexed_through) and cold-loads a thread it never held -----------

FACTS = [f"My neighbour Zarko{i} keeps {i} beehives near Lake Bled{i} since 19{i:02d}." for i in range(16)]


def _recall_search(query: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "recall", "args": {"query": query}, "id": "q1"}])


@pytest.fixture
def repair_index(postgres_uri):
    from langmem_paging.index.postgres import PostgresSearchIndex
    from tests.support.postgres_server import fresh_database

    index = PostgresSearchIndex(fresh_database(postgres_uri, "index_v4_repair"))
    index.drop("t")
    yield index
    index.close()


def test_search_loads_pages_stored_before_the_postgres_index_held_the_thread(postgres_store, repair_index):
    """Pages an agent stored on another index (or `import`, an older version) are found by the
    first search on Postgres: `has` was True for every thread, so they were never indexed."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    config = {"configurable": {"thread_id": "t"}}
    paging = PagingMiddleware(
        max_tokens=476, boundary="fixed_4", store=postgres_store, index=InMemoryBM25Index()
    )
    agent = create_agent(
        ScriptedChatModel(responses=["Noted."] * 12),
        middleware=[paging],
        store=postgres_store,
        checkpointer=saver,
    )
    for fact in FACTS[:12]:
        agent.invoke({"messages": [fact]}, config)
    assert repair_index.indexed_through("t") is None and not repair_index.has("t")
    model = ScriptedChatModel(responses=[_recall_search("beehives Lake Bled3"), "Three."])
    paging = PagingMiddleware(max_tokens=476, boundary="fixed_4", store=postgres_store, index=repair_index)
    agent = create_agent(model, middleware=[paging], store=postgres_store, checkpointer=saver)
    state = agent.invoke({"messages": ["How many beehives near Lake Bled3?"]}, config)
    assert FACTS[3] in next(m for m in state["messages"] if isinstance(m, ToolMessage)).content
    stored = len(paging.page_store.list_pages("t"))
    assert stored >= 3 and repair_index.indexed_through("t") == stored


def test_a_failed_postgres_index_write_is_repaired_and_found_by_a_fresh_process(
    postgres_store, repair_index, monkeypatch
):
    """Under `on_store_error="continue"` a failed index write left its page unsearchable for good."""
    import warnings

    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from langmem_paging.index.postgres import PostgresSearchIndex

    calls = {"n": 0}
    real_add = PostgresSearchIndex.add

    def flaky_add(self, thread_id, pages):
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("connection lost")
        return real_add(self, thread_id, pages)

    monkeypatch.setattr(PostgresSearchIndex, "add", flaky_add)
    paging = PagingMiddleware(
        max_tokens=196,
        boundary="fixed_2",
        store=postgres_store,
        index=repair_index,
        on_store_error="continue",
    )
    agent = create_agent(
        ScriptedChatModel(responses=["Noted."] * 40),
        middleware=[paging],
        store=postgres_store,
        checkpointer=InMemorySaver(),
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for fact in FACTS[:14]:
            agent.invoke({"messages": [fact]}, {"configurable": {"thread_id": "t"}})
    assert calls["n"] > 2 and any("not searchable" in str(w.message) for w in caught)
    pages = paging.page_store.list_pages("t")
    fresh = PostgresSearchIndex(repair_index._uri)  # another process's view: nothing cached
    try:
        assert len(pages) >= 4 and fresh.indexed_through("t") == len(pages)  # later steps filled the gap
        for page in pages:
            fact = next(str(m.content) for m in page.messages if "Zarko" in str(m.content))
            lake = fact.split("Lake ")[1].split(" ")[0]
            hits = fresh.search("t", f"beehives Lake {lake}", limit=1, allow=lambda p: True)
            assert [h.page_id for h in hits] == [page.id], f"{page.id} is not found by search"
    finally:
        fresh.close()


def test_indexed_through_of_another_process_write_is_seen_by_the_next_search(repair_index):
    """The search path reads `through` in the same round trip as the passages; what it caches is
    never staler than the last search (another worker deleting the thread, loading it again)."""
    from langmem_paging.index.postgres import PostgresSearchIndex

    repair_index.load("t", [_page(n, f"walrus {n}") for n in range(1, 6)])
    other = PostgresSearchIndex(repair_index._uri)
    try:
        assert other.indexed_through("t") == 5
        repair_index.drop("t")  # another worker deletes the thread
        assert repair_index.indexed_through("t") is None
        assert other.search("t", "walrus", limit=5, allow=lambda p: True) == []
        assert other.indexed_through("t") is None and not other.has("t")  # a later search cold-loads it
        repair_index.load("t", [_page(1, "walrus 1")])
        assert other.search("t", "walrus", limit=5, allow=lambda p: True)[0].page_id == "p1"
        assert other.indexed_through("t") == 1
    finally:
        other.close()


def test_a_failed_postgres_index_transaction_leaves_through_where_it_was(repair_index, monkeypatch):
    repair_index.load("t", [_page(1, "walrus"), _page(2, "zebra")])

    def broken_insert(thread_id, pages):
        yield from ()
        raise RuntimeError("insert failed")

    monkeypatch.setattr(repair_index, "_insert", broken_insert)
    with pytest.raises(RuntimeError):
        repair_index.add("t", [_page(3, "quokka")])  # `through` was raised inside the rolled-back transaction
    assert repair_index.indexed_through("t") == 2


def test_add_to_a_thread_the_postgres_index_never_held_waits_for_its_cold_load(repair_index):
    repair_index.add("t", [_page(4, "walrus")])  # p1-p3 were stored before: indexing p4 alone would hide them
    assert repair_index.indexed_through("t") is None
    assert repair_index.search("t", "walrus", limit=5, allow=lambda p: True) == []
    repair_index.add("t", [_page(1, "zebra")])  # a thread starts with p1
    assert repair_index.indexed_through("t") == 1
    repair_index.update("t", [_page(1, "quokka")])  # forget re-indexes a page: what it holds is unchanged
    assert repair_index.indexed_through("t") == 1
    assert [h.page_id for h in repair_index.search("t", "quokka", limit=5, allow=lambda p: True)] == ["p1"]


def test_async_connection_answers_indexed_through_natively(postgres_uri):
    import asyncio

    import psycopg

    from langmem_paging.index.postgres import PostgresSearchIndex
    from tests.support.postgres_server import fresh_database

    uri = fresh_database(postgres_uri, "index_v4_repair_async")

    async def scenario() -> tuple:
        async with await psycopg.AsyncConnection.connect(uri, autocommit=True) as conn:
            index = PostgresSearchIndex(conn)
            await index.adrop("t")
            before = await index.aindexed_through("t")
            await index.aload("t", [_page(1, "walrus"), _page(2, "zebra")])
            await index.aadd("t", [_page(4, "quokka")])
            hits = await index.asearch("t", "quokka", limit=5, allow=lambda p: True)
            return before, await index.aindexed_through("t"), await index.ahas("t"), [h.page_id for h in hits]

    assert asyncio.run(scenario()) == (None, 4, True, ["p4"])


def test_a_table_an_older_version_made_gets_what_it_holds_per_thread(postgres_uri):
    import psycopg

    from langmem_paging.index.postgres import PostgresSearchIndex
    from tests.support.postgres_server import fresh_database

    uri = fresh_database(postgres_uri, "index_v4_upgrade_threads")
    old = PostgresSearchIndex(uri)
    old.load("t", [_page(1, "walrus"), _page(12, "zebra")])
    old.close()
    with psycopg.connect(uri, autocommit=True) as conn:  # the previous release had no threads table
        conn.execute("DROP TABLE langmem_paging_passages_threads")
    new = PostgresSearchIndex(uri)
    try:
        assert new.indexed_through("t") == 12 and new.indexed_through("u") is None
    finally:
        new.close()
