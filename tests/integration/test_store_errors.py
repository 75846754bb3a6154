"""A failing store or search index: the turn fails loudly (or warns with ``on_store_error='continue'``),
a recall answers with an error tool message, and the next turn recovers with nothing lost."""

from __future__ import annotations

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
    reconstruct_history,
)
from langmem_paging.core.errors import PageStoreError, SearchIndexError
from langmem_paging.testing import FaultInjectingStore, ScriptedChatModel
from tests.support.harness import COUNTER, assert_valid_chat
from tests.support.scenario_helpers import FACTS, agent_history, prompt_tokens, scripted_agent
from tools.fuzzing.report import INJECTED, InjectedStoreError


def test_a_failing_store_fails_the_turn_and_the_next_turn_recovers():
    class Flaky(InMemoryStore):
        down = False

        def batch(self, ops):
            if self.down:
                raise ConnectionError("store down")
            return super().batch(ops)

    store = Flaky()
    paging = PagingMiddleware(max_tokens=500, boundary="fixed_4", store=store)
    paging.page_store.retries = 0
    model = ScriptedChatModel(responses=["Noted."] * 60)
    agent = create_agent(model, middleware=[paging], store=store, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "flaky"}}
    texts = [f"Fact {i}: the tide at Bay{i} turns at {i} pm." for i in range(40)]
    failed = []
    for i, text in enumerate(texts):
        store.down = 20 <= i < 26  # the store is down for six turns, then comes back
        try:
            agent.invoke({"messages": [text]}, config)
        except PageStoreError as error:  # the store's own error is the cause
            assert isinstance(error.__cause__, ConnectionError)
            failed.append(i)
    store.down = False
    assert failed, "turns that had to page while the store was down failed loudly"
    assert len(model.prompts) == len(texts) - len(failed)
    assert all(COUNTER(p) + COUNTER.count_tools(paging.tools) <= 500 for p in model.prompts)
    state = agent.get_state(config).values
    history = reconstruct_history(
        state["messages"],
        lambda p: paging.page_store.get("flaky", p),
        COUNTER,
        clusters=lambda c: paging.page_store.get_cluster("flaky", c),
        state=state["paging"],
    )
    # a failed turn's message stays in the thread (LangGraph keeps its input): nothing is lost
    assert [m.content for m in history if isinstance(m, HumanMessage)] == texts


class _StoreDown(PageStoreError):
    """What a dropped connection looks like once the page store's retries are spent."""


def _store_down(*args, **kwargs):
    raise _StoreDown("the store is down")


def test_a_store_error_during_recall_comes_back_as_an_error_tool_message():
    """B12: the store failing while `recall` read failed the tools node, leaving the call unanswered."""
    paging = PagingMiddleware(max_tokens=500, boundary="fixed_2", store=InMemoryStore())
    call = AIMessage("", tool_calls=[{"name": "recall", "args": {"page_ids": ["p1"]}, "id": "r1"}])
    model = ScriptedChatModel(responses=["ok"] * 12 + [call, "done", "ok"])
    agent = create_agent(model, tools=[], middleware=[paging], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for i in range(12):
        agent.invoke({"messages": [f"Note {i}: Zarko{i} keeps {i} beehives near Lake Bled."]}, config)
    paging.pager.page_store.get_many = _store_down
    state = agent.invoke({"messages": ["What about Zarko0?"]}, config)
    result = next(m for m in state["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "r1")
    assert result.status == "error" and "unavailable right now" in result.content
    del paging.pager.page_store.get_many
    agent.invoke({"messages": ["Anything else?"]}, config)
    assert_valid_chat(model.prompts[-1])


async def test_a_store_error_during_async_recall_comes_back_as_an_error():
    paging = PagingMiddleware(max_tokens=500, boundary="fixed_2", store=InMemoryStore())

    state, messages = None, []
    for i in range(12):
        messages = add_messages(
            messages,
            [HumanMessage(f"Note {i}: Zarko{i} keeps bees.", id=f"h{i}"), AIMessage("ok", id=f"a{i}")],
        )
        result = paging.pager.step(messages, state, "t")
        messages, state = result.apply(messages), result.state.to_value()
    paging.pager.page_store.aget_many = _store_down
    answer = await paging.pager.arecall("t", state, page_ids=["p1"], query="Zarko0")
    assert answer.status == "error" and "unavailable right now" in answer.content


class _IndexDown(InMemoryBM25Index):
    """A search index whose database is down."""

    def add(self, thread_id, pages):
        raise _StoreDown("search index unreachable")


def _index_down_pager(on_store_error):
    return Pager(
        PagingConfig(max_tokens=260, boundary="fixed_4"),
        PageStore(InMemoryStore()),
        index=_IndexDown(),
        on_store_error=on_store_error,
    )


_FACTS = [
    HumanMessage(f"Fact {n}: Zarko{n} keeps {n} beehives near Lake Bled{n}.", id=f"h{n}") for n in range(30)
]


async def test_an_index_failure_with_on_store_error_continue_warns_and_keeps_the_paged_result():
    """index.add ran outside the try applying on_store_error: 'continue' still failed the turn."""
    pager = _index_down_pager("continue")
    with pytest.warns(RuntimeWarning, match="search index failed"):
        result = await pager.astep(_FACTS, None, "t")
    assert result.pages and pager.page_store.get("t", result.pages[0].id) is not None
    with pytest.raises(SearchIndexError) as raised:
        _index_down_pager("raise").step(_FACTS, None, "t")
    assert isinstance(raised.value.__cause__, _StoreDown)


def test_flaky_store_recovers(rate: float = 0.1, seed: int = 0, turns: int = 40) -> None:
    """A store failing `rate` of calls: failed turns raise, the next turn recovers, nothing lost,
    budget held."""
    store = FaultInjectingStore(InMemoryStore(), p=rate, seed=seed, landed=0.5, error=InjectedStoreError)
    agent, paging, model = scripted_agent(520, boundary="fixed_2", store=store)
    config = {"configurable": {"thread_id": "t"}}
    failed = 0
    for i in range(turns):
        try:
            agent.invoke({"messages": [HumanMessage(FACTS[i % 40] + f" #{i}", id=f"h{i}")]}, config)
        except INJECTED:
            failed += 1
    store.enabled = False
    agent.invoke({"messages": [HumanMessage("last", id="last")]}, config)
    tokens = prompt_tokens(model, paging)
    assert tokens <= 520, f"prompt over budget after store failures: {tokens}"
    history = agent_history(paging, "t", agent.get_state(config).values)
    ids = [m.id for m in history if isinstance(m, HumanMessage)]
    missing = sorted({f"h{i}" for i in range(turns)} - set(ids))
    assert ids == [f"h{i}" for i in range(turns)] + ["last"], (
        f"{failed} failed turns; user turns lost or out of order: missing {missing[:5]}, got {len(ids)}"
    )
