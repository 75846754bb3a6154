"""The search index conformance suite (in-process BM25 and PostgreSQL full-text search), and what is
special to `PostgresSearchIndex`: shared by workers, used through the Pager and a compiled agent."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore

from langmem_paging import (
    InMemoryBM25Index,
    Pager,
    PageStore,
    PagingConfig,
    PagingMiddleware,
    SearchIndex,
)
from langmem_paging.index.postgres import MAX_PASSAGE_CHARS, PostgresSearchIndex
from langmem_paging.testing import ScriptedChatModel
from tests.support.indexes import empty_postgres_index, text_page

FACTS = [f"My neighbour Zarko{i} keeps {i} beehives near Lake Bled{i} since 19{i:02d}." for i in range(24)]


@pytest.fixture
def pg_index(index_database):
    index = empty_postgres_index(index_database)
    yield index
    index.close()


PAGES = [
    text_page(1, "We adopted a greyhound named Comet.", "Lovely."),
    text_page(2, "Pottery class on Tuesday evenings.", "Sounds fun."),
    text_page(3, "My sister runs marathons in Lisbon.", "Impressive."),
    text_page(4, "Comet the greyhound chewed my pottery.", "Oh no."),
]


def _load(index, thread: str, pages) -> None:
    if index.has(thread):
        index.add(thread, pages)
    else:
        index.load(thread, pages)


# -- conformance: every index ---------------------------------------------------------------------


def test_search_finds_the_passage_best_first(index):
    _load(index, "t", PAGES)
    hits = index.search("t", "greyhound pottery", limit=3, allow=lambda p: True)
    assert (hits[0].page_id, hits[0].index) == ("p4", 0)  # the passage holding both words
    assert {h.page_id for h in hits} == {"p1", "p2", "p4"}
    assert all(a.score >= b.score for a, b in itertools.pairwise(hits))


def test_search_respects_the_callers_filter_and_limit(index):
    _load(index, "t", PAGES)
    hits = index.search("t", "greyhound pottery", limit=5, allow=lambda p: p != "p4")
    assert {h.page_id for h in hits} == {"p1", "p2"}
    assert len(index.search("t", "greyhound pottery", limit=1, allow=lambda p: True)) == 1


def test_threads_never_see_each_others_passages(index):
    _load(index, "alice", PAGES[:2])
    _load(index, "bob", PAGES[2:3])
    assert index.search("bob", "greyhound", limit=5, allow=lambda p: True) == []
    assert [h.page_id for h in index.search("alice", "greyhound", limit=5, allow=lambda p: True)] == ["p1"]


def test_pages_added_later_are_found_and_drop_forgets_the_thread(index):
    _load(index, "t", PAGES[:1])
    index.add("t", PAGES[2:3])
    assert [h.page_id for h in index.search("t", "marathons Lisbon", limit=3, allow=lambda p: True)] == ["p3"]
    index.drop("t")
    assert not index.has("t") or index.search("t", "greyhound", limit=3, allow=lambda p: True) == []


def test_queries_with_no_words_and_huge_queries_find_nothing(index):
    _load(index, "t", PAGES)
    for query in ["", "   ", "the and of", "x" * 100_000, "!!! ??? '' \\"]:
        assert index.search("t", query, limit=3, allow=lambda p: True) == []


# -- PostgreSQL specifics ---------------------------------------------------------------------------


def test_postgres_index_stores_one_row_per_message_and_replaces_a_page_added_again(pg_index):
    pg_index.add("t", PAGES[:2])
    pg_index.add("t", [text_page(2, "Pottery moved to Thursdays.")])  # same id, new content: replaced
    with pg_index._connection() as conn:
        rows = conn.execute(f"SELECT page_id, position, body FROM {pg_index.table} ORDER BY 1, 2").fetchall()
    assert rows == [
        ("p1", 0, "We adopted a greyhound named Comet."),
        ("p1", 1, "Lovely."),
        ("p2", 0, "Pottery moved to Thursdays."),
    ]
    assert pg_index.search("t", "Tuesday", limit=3, allow=lambda p: True) == []


def test_postgres_index_takes_nul_bytes_and_huge_messages(pg_index):
    rare = " ".join(f"w{n}x{n * 7919 % 100_003}" for n in range(200_000))  # ~2.6 MB of distinct words
    pages = [text_page(1, "a NUL\x00inside greyhound"), text_page(2, rare + " zebra")]
    pg_index.add("t", pages)
    assert [h.page_id for h in pg_index.search("t", "greyhound", limit=3, allow=lambda p: True)] == ["p1"]
    assert [h.page_id for h in pg_index.search("t", "w5x39595", limit=3, allow=lambda p: True)] == ["p2"]
    assert len(rare) > MAX_PASSAGE_CHARS  # words past the indexed prefix are not found
    assert pg_index.search("t", "zebra", limit=3, allow=lambda p: True) == []


def test_postgres_index_reads_websearch_syntax(pg_index):
    pg_index.add("t", PAGES)
    hits = pg_index.search("t", '"the greyhound chewed" -Lisbon', limit=3, allow=lambda p: True)
    assert hits[0].page_id == "p4"


def test_postgres_index_refuses_names_it_would_have_to_quote(index_database):
    with pytest.raises(ValueError, match="`table`"):
        PostgresSearchIndex(index_database, table="passages; DROP TABLE store")
    with pytest.raises(ValueError, match="`config`"):
        PostgresSearchIndex(index_database, config="english'")
    with pytest.raises(TypeError, match="`conn` must be"):
        PostgresSearchIndex(42)


async def test_postgres_index_async_twins_on_an_async_pool_and_on_a_uri(index_database, pg_index):
    from psycopg_pool import AsyncConnectionPool

    async with AsyncConnectionPool(index_database, min_size=1, max_size=2, open=False) as pool:
        index = PostgresSearchIndex(pool)
        await index.aadd("async", PAGES)
        hits = await index.asearch("async", "marathons", limit=2, allow=lambda p: True)
        assert [h.page_id for h in hits] == ["p3"]
        with pytest.raises(TypeError, match="async connection"):
            index.search("async", "marathons", limit=2, allow=lambda p: True)
        await index.adrop("async")
        assert await index.asearch("async", "marathons", limit=2, allow=lambda p: True) == []
    # a sync source: the async twins run in a worker thread
    await pg_index.aload("sync", PAGES)
    assert [
        h.page_id for h in await pg_index.asearch("sync", "Comet", limit=5, allow=lambda p: p != "p1")
    ] == ["p4"]


# -- through the Pager and a compiled agent ---------------------------------------------------------

_IDS = itertools.count()


def _drive(pager: Pager, thread: str, facts, state=None, messages=None):
    """Turns of a chat paged by `pager` (replace mode), as the middleware does."""
    messages = list(messages or [])
    for fact in facts:
        n = next(_IDS)
        messages = add_messages(messages, [HumanMessage(fact, id=f"{thread}-h{n}")])
        result = pager.step(messages, state, thread)
        messages = add_messages(result.apply(messages), [AIMessage("Noted.", id=f"{thread}-a{n}")])
        state = result.state.to_value()
    return messages, state


def test_pager_recalls_by_query_from_the_postgres_index(index_database, pg_index):
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(index_database) as store:
        store.setup()
        config = PagingConfig(max_tokens=260, boundary="fixed_4", policy="fifo")
        pager = Pager(config, PageStore(store), index=pg_index)
        _, state = _drive(pager, "bees", FACTS[:12])
        answer = pager.recall("bees", state, query="How many beehives near Lake Bled2?")
        assert FACTS[2] in answer.content and "=== p" in answer.content
        assert "=== p" not in pager.recall("other", state, query="beehives").content  # another thread


def test_a_second_worker_finds_pages_another_worker_formed(index_database, pg_index):
    """Two workers of one deployment: separate processes, one database."""
    store_uri = index_database
    from langgraph.store.postgres import PostgresStore

    with (
        PostgresStore.from_conn_string(store_uri) as store_a,
        PostgresStore.from_conn_string(store_uri) as store_b,
    ):
        store_a.setup()
        config = PagingConfig(max_tokens=260, boundary="fixed_4", policy="fifo")
        worker_a = Pager(config, PageStore(store_a), index=PostgresSearchIndex(store_uri))
        worker_b = Pager(config, PageStore(store_b), index=PostgresSearchIndex(store_uri))
        messages, state = _drive(worker_a, "shared", FACTS[:12])
        assert FACTS[1] in worker_b.recall("shared", state, query="beehives Bled1").content
        messages, state = _drive(worker_a, "shared", FACTS[12:], state=state, messages=messages)
        answer = worker_b.recall("shared", state, query="beehives Bled17")  # formed after b's first search
        assert FACTS[17] in answer.content


def test_in_process_index_catches_up_with_pages_another_worker_formed(index_database):
    """Each worker's in-process BM25 index misses pages another worker formed after its first
    search of the thread; the search reads them (the branch's newest page is above what the index
    holds) instead of going stale."""
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(index_database) as store:
        store.setup()
        config = PagingConfig(max_tokens=260, boundary="fixed_4", policy="fifo")
        worker_a = Pager(config, PageStore(store), index=InMemoryBM25Index())
        worker_b = Pager(config, PageStore(store), index=InMemoryBM25Index())
        messages, state = _drive(worker_a, "stale", FACTS[:12])
        assert FACTS[1] in worker_b.recall("stale", state, query="beehives Bled1").content
        _, state = _drive(worker_a, "stale", FACTS[12:], state=state, messages=messages)
        assert FACTS[17] in worker_a.recall("stale", state, query="beehives Bled17").content
        assert FACTS[17] in worker_b.recall("stale", state, query="beehives Bled17").content  # not stale


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_agent_recalls_by_query_through_the_postgres_index(index_database, pg_index, mode):
    from langgraph.store.postgres import PostgresStore

    call = AIMessage(
        "", tool_calls=[{"name": "recall", "args": {"query": "beehives Lake Bled3"}, "id": "q1"}]
    )
    model = ScriptedChatModel(responses=["Noted."] * 12 + [call, "Three."])
    with PostgresStore.from_conn_string(index_database) as store:
        store.setup()
        paging = PagingMiddleware(
            max_tokens=476, boundary="fixed_4", store=store, index=pg_index
        )  # room for a passage
        agent = create_agent(model, tools=[], middleware=[paging], checkpointer=InMemorySaver(), store=store)
        config = {"configurable": {"thread_id": f"agent-{mode}"}}
        for fact in [*FACTS[:12], "How many beehives near Lake Bled3?"]:
            if mode == "sync":
                state = agent.invoke({"messages": [fact]}, config)
            else:
                state = asyncio.run(agent.ainvoke({"messages": [fact]}, config))
        tool_message = next(m for m in state["messages"] if isinstance(m, ToolMessage))
        assert FACTS[3] in tool_message.content
        with pg_index._connection() as conn:
            (rows,) = conn.execute(
                f"SELECT count(*) FROM {pg_index.table} WHERE thread_id = %s", (f"agent-{mode}",)
            ).fetchone()
        assert rows == sum(len(p.messages) for p in paging.page_store.list_pages(f"agent-{mode}"))


async def test_async_agent_pages_and_searches_with_a_postgres_index_on_an_async_connection(
    index_database, pg_index
):
    """The async step awaited the index's sync methods: on an AsyncConnection (a setup the index
    offers) every paging step raised TypeError inside astep."""
    import psycopg

    call = AIMessage(
        "", tool_calls=[{"name": "recall", "args": {"query": "beehives Lake Bled5"}, "id": "q1"}]
    )
    model = ScriptedChatModel(responses=["Noted."] * 12 + [call, "Five."])
    async with await psycopg.AsyncConnection.connect(index_database, autocommit=True) as conn:
        index = PostgresSearchIndex(conn)
        paging = PagingMiddleware(max_tokens=476, boundary="fixed_4", index=index)
        agent = create_agent(
            model, tools=[], middleware=[paging], checkpointer=InMemorySaver(), store=InMemoryStore()
        )
        config = {"configurable": {"thread_id": "async-conn"}}
        for fact in [*FACTS[:12], "How many beehives near Lake Bled5?"]:
            state = await agent.ainvoke({"messages": [fact]}, config)
        cursor = await conn.execute(
            f"SELECT count(*) FROM {index.table} WHERE thread_id = %s", ("async-conn",)
        )
        (rows,) = await cursor.fetchone()
    tool_message = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert FACTS[5] in tool_message.content
    assert rows > 0


def test_postgres_index_on_one_connection_shared_by_threads(index_database, pg_index):
    from concurrent.futures import ThreadPoolExecutor

    import psycopg

    with psycopg.connect(index_database, autocommit=True) as conn:
        index = PostgresSearchIndex(conn)

        def worker(k: int) -> list[str]:
            thread = f"shared-{k}"
            index.add(thread, [text_page(n, f"Worker{k} fact {n} about greyhounds.") for n in range(1, 6)])
            return [
                h.page_id
                for h in index.search(thread, f"Worker{k} greyhounds", limit=10, allow=lambda p: True)
            ]

        with ThreadPoolExecutor(max_workers=8) as pool:
            found = list(pool.map(worker, range(16)))
    assert all(sorted(ids) == ["p1", "p2", "p3", "p4", "p5"] for ids in found), found


def test_a_search_index_needs_only_the_documented_methods():
    """A third-party index implements has, load, add, search and drop, nothing private."""

    class Nothing(SearchIndex):
        def has(self, thread_id):
            return True

        def load(self, thread_id, pages):
            pass

        def add(self, thread_id, pages):
            pass

        def search(self, thread_id, query, *, limit, allow):
            return []

        def drop(self, thread_id):
            pass

    assert Nothing().search("t", "q", limit=3, allow=lambda p: True) == []
    assert SearchIndex.__abstractmethods__ == {"has", "load", "add", "search", "drop"}


class _TopicEmbedder:
    """Unit vectors by topic word: a stand-in for a sentence embedder."""

    topics = ("dog", "pottery", "marathon")

    def embed(self, texts):
        import numpy as np

        out = []
        for text in texts:
            lower = text.lower()
            vector = np.array(
                [1.0 if (t in lower or (t == "dog" and "greyhound" in lower)) else 0.0 for t in self.topics]
            )
            out.append(vector / (np.linalg.norm(vector) or 1.0))
        return out


def test_hybrid_search_fuses_scores_so_a_meaning_match_without_shared_words_ranks():
    index = InMemoryBM25Index(embedder=_TopicEmbedder())
    index.load("t", PAGES)
    hits = index.search("t", "dog", limit=4, allow=lambda p: True)  # no page says "dog"
    assert hits and hits[0].page_id in {"p1", "p4"}  # the greyhound pages, by meaning
    lexical = index.search("t", "marathons Lisbon", limit=2, allow=lambda p: True)
    assert lexical[0].page_id == "p3" and lexical[0].score > 1.0  # normalized BM25 (1.0) + cosine
