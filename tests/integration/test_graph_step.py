"""One graph-facing step: the middleware and the node page alike through `GraphStep`, one error for a
state without the ``paging`` key, one thread-id lookup."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingConfig, PagingMiddleware, PagingNode
from langmem_paging.config import RECALL_BUDGET_SHARE, RECALL_MIN_TOKENS, PagingOptions
from langmem_paging.core.messages import is_bookmark, rewrites_all
from langmem_paging.integrations.agents import AgentPagingOptions
from langmem_paging.integrations.graph_state import (
    MISSING_STATE,
    NO_THREAD,
    GraphCall,
    find_thread_id,
    paging_value,
)
from langmem_paging.ops.options_table import options_markdown
from langmem_paging.testing import ScriptedChatModel

OPTIONS: dict[str, Any] = {"max_tokens": 12, "boundary": "fixed_2", "token_counter": len}


def _turns(n: int) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for i in range(n):
        out += [
            HumanMessage(f"I will fly to city {i} on Friday.", id=f"h{i}"),
            AIMessage("Noted.", id=f"a{i}"),
        ]
    return out


def _middleware_update(
    paging: PagingMiddleware, messages: list[BaseMessage], state: dict[str, Any], store: InMemoryStore
) -> dict[str, Any]:
    """One model call through the middleware's own hook, as create_agent makes it (no tools: the
    node sees no tool schemas either)."""
    request = ModelRequest(
        model=ScriptedChatModel(responses=["ok"]),
        messages=list(messages),  # type: ignore[arg-type]
        tools=[],
        state={"messages": messages, **state},  # type: ignore[typeddict-item]
        runtime=SimpleNamespace(execution_info=SimpleNamespace(thread_id="t"), store=store),
    )  # type: ignore[arg-type]
    answer = AIMessage("ok", id="answer")
    out = paging.wrap_model_call(request, lambda r: ModelResponse(result=[answer]))
    update = dict(out.command.update or {}) if isinstance(out, ExtendedModelResponse) else {}  # type: ignore[union-attr]
    if rewrites_all(
        update.get("messages", [])
    ):  # a rewrite ends with the answer create_agent applied before it
        assert update["messages"][-1] is answer
        update["messages"] = update["messages"][:-1]
    return update


def _same_store_free(update: dict[str, Any]) -> dict[str, Any]:
    """The update without the lifecycle generation its store drew at random (each side has its own store)."""
    if "paging" not in update:
        return update
    return {**update, "paging": {k: v for k, v in update["paging"].items() if k != "lifecycle"}}


@pytest.mark.parametrize("turns", [3, 6, 10])
def test_middleware_and_node_give_the_same_update_for_the_same_state(turns: int) -> None:
    messages = _turns(turns)
    m_store, n_store = InMemoryStore(), InMemoryStore()
    middleware, node = PagingMiddleware(store=m_store, **OPTIONS), PagingNode(store=n_store, **OPTIONS)
    m_state: dict[str, Any] = {}
    n_state: dict[str, Any] = {}
    for point in range(2, len(messages) + 1, 2):  # a call per turn, each on the state the last one left
        m_update = _middleware_update(middleware, messages[:point], m_state, m_store)
        n_update = node.invoke(
            {"messages": messages[:point], **n_state}, {"configurable": {"thread_id": "t"}}
        )
        assert _same_store_free(m_update) == _same_store_free(n_update)
        if "paging" in m_update:
            m_state, n_state = {"paging": m_update["paging"]}, {"paging": n_update["paging"]}
    assert "paging" in m_state, "the budget was meant to page"


def test_graph_call_carries_what_the_update_needs() -> None:
    history = _turns(6)
    first = GraphCall.prepare(history, None, "view", "t")
    assert first.view == history and first.thread_id == "t"


def test_node_in_a_graph_without_the_paging_key_says_which_schema_to_use() -> None:
    node = PagingNode(**OPTIONS)
    graph = (
        StateGraph(MessagesState)
        .add_node("paging", node)  # no `paging` channel: its update is dropped
        .add_node("reply", lambda s: {"messages": [AIMessage("Noted.")]})
        .add_edge(START, "paging")
        .add_edge("paging", "reply")
        .compile(checkpointer=InMemorySaver(), store=InMemoryStore())
    )
    config: Any = {"configurable": {"thread_id": "t1"}}
    with pytest.raises(ValueError, match="PagingMessagesState") as raised:
        for i in range(8):
            graph.invoke({"messages": [HumanMessage(f"I will fly to city {i} on Friday.")]}, config)
    assert str(raised.value) == MISSING_STATE


def test_middleware_refuses_a_state_without_the_paging_key_once_it_paged() -> None:
    """The middleware had no check: a state schema without the key lost every paging update silently."""
    paging = PagingMiddleware(**OPTIONS)
    store = InMemoryStore()
    update = _middleware_update(paging, _turns(8), {}, store)
    paged = [m for m in update["messages"] if is_bookmark(m)]
    assert paged
    messages = [*paged, *_turns(8)[-2:]]
    with pytest.raises(ValueError, match="PagingMessagesState"):
        _middleware_update(paging, messages, {}, store)


def test_one_thread_id_lookup_and_one_error() -> None:
    assert find_thread_id({"configurable": {"thread_id": 7}}) == "7"
    assert find_thread_id({}) is None
    assert find_thread_id(None, SimpleNamespace(execution_info=SimpleNamespace(thread_id="r"))) == "r"
    node = PagingNode(**OPTIONS)
    with pytest.raises(ValueError) as raised:
        node.invoke({"messages": _turns(1)}, {})
    assert str(raised.value) == NO_THREAD
    assert paging_value({"messages": _turns(2)}) is None


def test_every_place_the_options_are_listed_follows_the_one_list() -> None:
    """docs/options.md is regenerated from the code; the TypedDicts hold exactly the options
    `PagingConfig` validates (its fields are what mypy checks attribute reads against)."""
    options = set(PagingConfig.fields())
    docs = Path(__file__).parents[2] / "docs" / "options.md"
    assert docs.read_text() == options_markdown(), (
        "docs/options.md is stale: python -m langmem_paging.ops.options_table > docs/options.md"
    )
    assert set(PagingOptions.__annotations__) == options - {"max_tokens"}
    assert set(AgentPagingOptions.__annotations__) == (options - {"model"}) | {
        "ttl",
        "index",
        "on_store_error",
    }
    assert all(doc.strip() for doc in PagingConfig.fields().values())


def test_recall_sizing_uses_the_named_constants() -> None:
    config = PagingConfig(max_tokens=100)
    assert config.recall_cap_for(100) == RECALL_MIN_TOKENS
    assert config.recall_cap_for(1000) == int(1000 * RECALL_BUDGET_SHARE)
