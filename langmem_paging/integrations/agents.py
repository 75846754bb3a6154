"""`create_paging_agent`: `langchain.agents.create_agent` with `PagingMiddleware` in one call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.graph.state import CompiledStateGraph

from langmem_paging.config import BasePagingOptions, Budget
from langmem_paging.index.base import SearchIndex
from langmem_paging.integrations.middleware import PagingMiddleware
from langmem_paging.runtime.engine import OnStoreError

__all__ = ["AgentPagingOptions", "create_paging_agent"]


class AgentPagingOptions(BasePagingOptions, total=False):
    """`create_paging_agent`'s paging keywords: `PagingMiddleware`'s (`PagingOptions` and the call
    resources) but `model`, which names the agent's chat model there (its encoding follows it)."""

    max_tokens: Budget
    ttl: float | None
    index: SearchIndex | None
    on_store_error: OnStoreError


DEFAULT_MAX_TOKENS = 4000
"""The budget when `paging_options` names none: small enough that paging shows within a demo."""


def create_paging_agent(
    model: BaseChatModel | str,
    tools: Sequence[BaseTool] = (),
    *,
    system_prompt: str | None = None,
    store: Any = None,
    checkpointer: Any = None,
    **paging_options: Unpack[AgentPagingOptions],
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A `create_agent` graph whose context is paged.

    Args:
        model: A chat model, or a model string for `create_agent` (``"openai:gpt-4o-mini"`` needs
            the ``openai`` extra).
        tools: The agent's own tools; the middleware adds `recall`.
        system_prompt: The agent's system prompt.
        store: Where pages go (any LangGraph `BaseStore`); None lets a LangGraph server supply it.
        checkpointer: The graph's checkpointer; None lets a LangGraph server supply it.
        **paging_options: `PagingMiddleware` options (``max_tokens`` defaults to 4000, ``boundary``,
            ``policy``, ``index``, ``ttl``, ...).

    Returns:
        The compiled graph; its middleware is ``graph.paging`` (``graph.paging.page_store`` reads pages).

    Example:
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from langgraph.store.memory import InMemoryStore
        >>> from langmem_paging.testing import ScriptedChatModel
        >>> agent = create_paging_agent(ScriptedChatModel(responses=["Noted."] * 4), store=InMemoryStore(),
        ...                             checkpointer=InMemorySaver(), max_tokens=170, boundary="fixed_2",
        ...                             bookmark_share=0.3)
        >>> config = {"configurable": {"thread_id": "t1"}}
        >>> for city in ["Lisbon", "Kyoto", "Quito", "Oslo"]:
        ...     state = agent.invoke({"messages": [f"I will fly to {city} on Friday."]}, config)
        >>> [m.content for m in state["messages"]]  # the recall tool's schema takes 116 of the 170
        ['[p1:Lisbon fly Noted,Friday]', '[p2:Kyoto fly Noted,Friday]', '[p3:Quito fly Noted,Friday]', 'I will fly to Oslo on Friday.', 'Noted.']
        >>> agent.paging.page_store.get("t1", "p1").messages[0].content
        'I will fly to Lisbon on Friday.'
    """
    paging_options.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
    paging = PagingMiddleware(store=store, **paging_options)
    graph = create_agent(
        model,
        tools=list(tools),
        system_prompt=system_prompt,
        middleware=[paging],
        store=store,
        checkpointer=checkpointer,
    )
    graph.paging = paging  # type: ignore[attr-defined]  # the middleware, for its page store
    return graph
