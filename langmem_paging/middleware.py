"""`PagingMiddleware` for `langchain.agents.create_agent`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from langmem_paging.boundaries import BoundaryStrategy
from langmem_paging.config import PagingConfig
from langmem_paging.pager import Pager
from langmem_paging.policies import EvictionPolicy
from langmem_paging.recall import make_recall_tool
from langmem_paging.store import PageStore

__all__ = ["PagingMiddleware", "thread_id_of"]


def thread_id_of(runtime: Runtime | None = None) -> str:
    """The running graph's thread id; a clear error when the run has none."""
    info = getattr(runtime, "execution_info", None)
    thread_id = getattr(info, "thread_id", None)
    if not thread_id:
        try:
            thread_id = get_config().get("configurable", {}).get("thread_id")
        except RuntimeError:
            thread_id = None
    if not thread_id:
        raise ValueError(
            "Paging needs a thread: invoke the graph with "
            "config={'configurable': {'thread_id': '...'}} (and a checkpointer)."
        )
    return str(thread_id)


class PagingMiddleware(AgentMiddleware):
    """Cooperative memory paging for `create_agent`: bookmarks in place, `recall` to bring pages back.

    Before each model call, when the messages exceed `max_tokens`, old messages are
    cut into pages, the policy evicts pages into the page store, and each evicted
    page is replaced at its place by a bookmark ``[pN:kw1,kw2,...]``. The middleware
    registers a `recall` tool that returns a page's exact text.

    Args:
        max_tokens: Budget for the message list the model receives.
        low_water_tokens: Page down to this when over budget (default 75% of `max_tokens`).
        boundary: `fixed_N`, `tokens_N`, `exchange`, `session`, `topic_shift`, or a strategy.
        policy: `fifo`, `lru`, `lfu`, `semantic`, or an `EvictionPolicy`.
        store: Where pages go; default the graph's store (`create_agent(store=...)`).
        mode: `replace` rewrites state (bookmarks replace pages, via `before_model`);
            `view` keeps the full history in state and shows the model the paged view.
        model / encoding: Choose the tiktoken encoding.
        token_counter: Callable counting a message list, instead of tiktoken.
        bookmarker: Callable making bookmarks (default `KeywordBookmarker`).
        recall_max_tokens: Size cap of one recall result.
        recent_messages: Recent context size for the semantic policy.
        search_results: Pages a `recall(query=...)` returns at most.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from langgraph.store.memory import InMemoryStore
        >>> from langmem_paging.testing import ScriptedChatModel
        >>> store = InMemoryStore()
        >>> paging = PagingMiddleware(max_tokens=60, boundary="fixed_2", store=store)
        >>> model = ScriptedChatModel(responses=["Noted."] * 8)
        >>> agent = create_agent(model, middleware=[paging], checkpointer=InMemorySaver(), store=store)
        >>> config = {"configurable": {"thread_id": "t1"}}
        >>> for city in ["Lisbon", "Kyoto", "Quito", "Oslo"]:
        ...     state = agent.invoke({"messages": [f"I will fly to {city} on Friday."]}, config)
        >>> [m.content for m in state["messages"]][:2]
        ['[p1:Lisbon,Friday,fly,Noted]', '[p2:Kyoto,Friday,fly,Noted]']
        >>> [m.content for m in paging.page_store.get("t1", "p1").messages]
        ['I will fly to Lisbon on Friday.', 'Noted.']
    """

    def __init__(
        self,
        *,
        max_tokens: int,
        low_water_tokens: int | None = None,
        boundary: str | BoundaryStrategy = "fixed_20",
        policy: str | EvictionPolicy = "fifo",
        store: BaseStore | None = None,
        mode: Literal["replace", "view"] = "replace",
        model: str | None = None,
        encoding: str | None = None,
        token_counter: Callable | None = None,
        bookmarker: Callable | None = None,
        recall_max_tokens: int | None = None,
        recent_messages: int = 6,
        search_results: int = 2,
    ) -> None:
        super().__init__()
        self.config = PagingConfig(
            max_tokens=max_tokens,
            low_water_tokens=low_water_tokens,
            boundary=boundary,
            policy=policy,
            mode=mode,
            model=model,
            encoding=encoding,
            token_counter=token_counter,
            bookmarker=bookmarker,
            recall_max_tokens=recall_max_tokens,
            recent_messages=recent_messages,
            search_results=search_results,
        )
        self.page_store = PageStore(store)
        self.pager = Pager(self.config, self.page_store)
        self.tools = [make_recall_tool(self.pager)]

    # -- replace mode: rewrite state before the model runs ---------------------------
    def before_model(self, state: dict[str, Any], runtime: Runtime) -> dict[str, Any] | None:
        if self.config.mode != "replace":
            return None
        self.page_store.bind(runtime.store)
        result = self.pager.step(state["messages"], thread_id_of(runtime))
        return {"messages": result.updates} if result.updates else None

    async def abefore_model(self, state: dict[str, Any], runtime: Runtime) -> dict[str, Any] | None:
        if self.config.mode != "replace":
            return None
        self.page_store.bind(runtime.store)
        result = await self.pager.astep(state["messages"], thread_id_of(runtime))
        return {"messages": result.updates} if result.updates else None

    # -- view mode: state keeps everything, the model sees the paged view -------------
    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        if self.config.mode != "view":
            return handler(request)
        self.page_store.bind(request.runtime.store if request.runtime else None)
        result = self.pager.step(request.messages, thread_id_of(request.runtime))
        return handler(request.override(messages=result.view))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        if self.config.mode != "view":
            return await handler(request)
        self.page_store.bind(request.runtime.store if request.runtime else None)
        result = await self.pager.astep(request.messages, thread_id_of(request.runtime))
        return await handler(request.override(messages=result.view))
