"""Nothing a call brings is kept on the instance: one middleware serves any number of agents.

Regressions of core v3's defects: a `PagingMiddleware` made without `store=` bound itself to the
first graph's store and wrote every later agent's pages there; the encoding of the first model it
saw was used for every model; an async step called a sync search index on the event loop (a
first search rebuilt the index there); and any exception that was not a Value/Type/Key/Attribute
error was taken for a store failure and swallowed under ``on_store_error="continue"``.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import InMemoryBM25Index, PageStore, PagingMiddleware, PagingWarning, TokenCounter
from langmem_paging.index.base import SearchIndex
from langmem_paging.strategies.policies import FIFOPolicy
from langmem_paging.testing import ScriptedChatModel

CONFIG = {"configurable": {"thread_id": "t"}}


def _say(agent, texts: list[str], config=CONFIG) -> dict:
    state: dict = {}
    for text in texts:
        state = agent.invoke({"messages": [text]}, config)
    return state


def _texts(page_store: PageStore, thread_id: str) -> str:
    return " ".join(str(m.content) for page in page_store.scan(thread_id) for m in page.messages)


def test_one_middleware_in_two_agents_keeps_each_threads_pages_in_its_own_graphs_store():
    paging = PagingMiddleware(max_tokens=196, boundary="fixed_2")  # no store: each graph's own
    store_a, store_b = InMemoryStore(), InMemoryStore()
    agent_a = create_agent(
        ScriptedChatModel(responses=["Noted."] * 20),
        middleware=[paging],
        store=store_a,
        checkpointer=InMemorySaver(),
    )
    agent_b = create_agent(
        ScriptedChatModel(responses=["Noted."] * 20),
        middleware=[paging],
        store=store_b,
        checkpointer=InMemorySaver(),
    )
    _say(agent_a, [f"Tenant A secret {i}: the vault code is alpha{i}." for i in range(8)])
    _say(agent_b, [f"Tenant B secret {i}: the vault code is bravo{i}." for i in range(8)])
    in_a, in_b = _texts(PageStore(store_a), "t"), _texts(PageStore(store_b), "t")
    assert "alpha0" in in_a and "bravo" not in in_a
    assert "bravo0" in in_b and "alpha" not in in_b


def test_one_middleware_in_two_agents_searches_each_agents_own_pages():
    """The same thread id in two stores is two threads: a search in B never finds A's text."""
    paging = PagingMiddleware(max_tokens=196, boundary="fixed_2")
    store_a, store_b = InMemoryStore(), InMemoryStore()
    search = AIMessage("", tool_calls=[{"name": "recall", "args": {"query": "vault code"}, "id": "s1"}])
    model_b = ScriptedChatModel(responses=["Noted."] * 8 + [search, "Done."])
    agent_a = create_agent(
        ScriptedChatModel(responses=["Noted."] * 20),
        middleware=[paging],
        store=store_a,
        checkpointer=InMemorySaver(),
    )
    agent_b = create_agent(model_b, middleware=[paging], store=store_b, checkpointer=InMemorySaver())
    _say(agent_a, [f"Tenant A secret {i}: the vault code is alpha{i}." for i in range(8)])
    agent_a.invoke({"messages": ["warm A's search index"]}, CONFIG)
    _say(agent_b, [f"Tenant B secret {i}: the vault code is bravo{i}." for i in range(8)])
    with pytest.warns(PagingWarning, match="needs .* tokens"):  # the search result passes an 80-token budget
        state = agent_b.invoke({"messages": ["What were the vault codes?"]}, CONFIG)
    result = next(m for m in state["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "s1")
    assert "bravo" in result.content and "alpha" not in result.content


class _NamedModel(ScriptedChatModel):
    model_name: str = "gpt-4o-mini"


def test_each_call_counts_with_its_own_models_encoding():
    """The first model's encoding was cached on the instance and used for every later model."""
    paging = PagingMiddleware(max_tokens=2000)
    text = "Учора ми ходили до музею історії, а потім пили каву в старому місті."  # counts differ a lot
    for name, encoding in [("gpt-4o-mini", "o200k_base"), ("gpt-3.5-turbo", "cl100k_base")]:
        model = _NamedModel(responses=["ok"], model_name=name)
        agent = create_agent(model, middleware=[paging], store=InMemoryStore(), checkpointer=InMemorySaver())
        state = agent.invoke({"messages": [text]}, CONFIG)
        assert state["paging"]["tokens"] == TokenCounter(encoding=encoding)(model.prompts[-1]), name


class _NotOnTheLoop(SearchIndex):
    """An in-memory index whose blocking methods fail when called on an event loop's thread."""

    def __init__(self) -> None:
        self.inner = InMemoryBM25Index()
        self.calls: list[str] = []

    def _check(self, name: str) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.calls.append(f"{name}@{threading.current_thread().name}")
            return
        raise AssertionError(f"SearchIndex.{name} called on the event loop")

    def has(self, thread_id):
        self._check("has")
        return self.inner.has(thread_id)

    def load(self, thread_id, pages):
        self._check("load")
        self.inner.load(thread_id, pages)

    def add(self, thread_id, pages):
        self._check("add")
        self.inner.add(thread_id, pages)

    def search(self, thread_id, query, *, limit, allow):
        self._check("search")
        return self.inner.search(thread_id, query, limit=limit, allow=allow)

    def drop(self, thread_id):
        self._check("drop")
        self.inner.drop(thread_id)


async def test_an_async_step_and_recall_never_call_a_blocking_index_method_on_the_loop():
    index = _NotOnTheLoop()
    search = AIMessage("", tool_calls=[{"name": "recall", "args": {"query": "Zarko3 beehives"}, "id": "s1"}])
    model = ScriptedChatModel(responses=["Noted."] * 30 + [search, "Three."])
    paging = PagingMiddleware(max_tokens=700, boundary="fixed_2", index=index)
    agent = create_agent(model, middleware=[paging], store=InMemoryStore(), checkpointer=InMemorySaver())
    for i in range(30):
        await agent.ainvoke({"messages": [f"Note {i}: Zarko{i} keeps {i} beehives near Lake Bled."]}, CONFIG)
    state = await agent.ainvoke({"messages": ["How many beehives does Zarko3 keep?"]}, CONFIG)
    result = next(m for m in state["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "s1")
    assert "Zarko3 keeps 3 beehives" in result.content
    assert {c.split("@")[0] for c in index.calls} >= {"has", "load", "search"}  # a cold start, then a search


class _BuggyPolicy(FIFOPolicy):
    def victim(self, candidates, context):
        raise RuntimeError("a bug in the policy")


class _UnreachableBookmarker:
    """A bookmarker whose model endpoint is down."""

    def __call__(self, page_id, messages, context):
        raise ConnectionError("bookmark model unreachable")


@pytest.mark.parametrize(("option", "error"), [("policy", RuntimeError), ("bookmarker", ConnectionError)])
def test_errors_that_are_not_the_stores_propagate_with_their_own_type_under_continue(option, error):
    value = _BuggyPolicy() if option == "policy" else _UnreachableBookmarker()
    paging = PagingMiddleware(
        max_tokens=200, boundary="fixed_2", on_store_error="continue", **{option: value}
    )
    agent = create_agent(
        ScriptedChatModel(responses=["Noted."] * 20),
        middleware=[paging],
        store=InMemoryStore(),
        checkpointer=InMemorySaver(),
    )
    with pytest.raises(error):
        _say(agent, [f"Fact {i}: the tide at Bay{i} turns at {i} pm." for i in range(10)])


def test_a_page_store_without_a_graph_store_reads_through_the_graph_store_named():
    paging = PagingMiddleware(max_tokens=300)
    with pytest.raises(ValueError, match=r"PageStore\(store\)"):
        paging.page_store  # noqa: B018 - the property is what is tested


def test_the_recall_tool_reads_the_store_of_its_own_call():
    """A recall by id in agent B reads B's store even though agent A ran first."""
    paging = PagingMiddleware(max_tokens=196, boundary="fixed_2")
    store_a, store_b = InMemoryStore(), InMemoryStore()
    call = AIMessage("", tool_calls=[{"name": "recall", "args": {"page_ids": ["p1"]}, "id": "r1"}])
    agent_a = create_agent(
        ScriptedChatModel(responses=["Noted."] * 20),
        middleware=[paging],
        store=store_a,
        checkpointer=InMemorySaver(),
    )
    agent_b = create_agent(
        ScriptedChatModel(responses=["Noted."] * 8 + [call, "Done."]),
        middleware=[paging],
        store=store_b,
        checkpointer=InMemorySaver(),
    )
    _say(agent_a, [f"Tenant A secret {i}: the vault code is alpha{i}." for i in range(8)])
    _say(agent_b, [f"Tenant B secret {i}: the vault code is bravo{i}." for i in range(8)])
    with pytest.warns(PagingWarning, match="needs .* tokens"):  # the recalled page passes an 80-token budget
        state = agent_b.invoke({"messages": [HumanMessage("Which code came first?")]}, CONFIG)
    result = next(m for m in state["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "r1")
    assert "bravo0" in result.content and "alpha" not in result.content
