"""`PagingNode`: paging as a Runnable node for hand-built `StateGraph`s (or a `pre_model_hook`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.config import get_store
from langgraph.store.base import BaseStore

from langmem_paging.boundaries import BoundaryStrategy
from langmem_paging.config import PagingConfig
from langmem_paging.pager import Pager
from langmem_paging.paging import PagingResult
from langmem_paging.policies import EvictionPolicy
from langmem_paging.recall import make_recall_tool
from langmem_paging.store import PageStore

__all__ = ["PagingNode"]


def _graph_store() -> BaseStore | None:
    try:
        return get_store()
    except RuntimeError:  # called outside a graph run
        return None


class PagingNode(Runnable[dict, dict]):
    """Pages the messages of a `MessagesState` graph before the model node.

    With ``output_messages_key == input_messages_key`` (default ``"messages"``) it
    returns `add_messages` updates: bookmarks replace pages in state. With another
    key, e.g. ``"llm_input_messages"`` for a `pre_model_hook`, it returns the paged
    view under that key and leaves the history in state untouched.
    Give the model `node.recall_tool` (and route its calls to a `ToolNode`).

    Args:
        input_messages_key: State key holding the messages.
        output_messages_key: State key to write (see above).
        Other arguments as in `PagingMiddleware`.

    Example:
        >>> from langgraph.graph import StateGraph, MessagesState, START
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from langgraph.store.memory import InMemoryStore
        >>> paging = PagingNode(max_tokens=40, boundary="fixed_2")
        >>> def reply(state):
        ...     return {"messages": [("ai", "Noted.")]}
        >>> graph = (
        ...     StateGraph(MessagesState)
        ...     .add_node("paging", paging)
        ...     .add_node("reply", reply)
        ...     .add_edge(START, "paging")
        ...     .add_edge("paging", "reply")
        ...     .compile(checkpointer=InMemorySaver(), store=InMemoryStore())
        ... )
        >>> config = {"configurable": {"thread_id": "t1"}}
        >>> for city in ["Lisbon", "Kyoto", "Quito", "Oslo"]:
        ...     state = graph.invoke({"messages": [("user", f"I will fly to {city}.")]}, config)
        >>> state["messages"][0].content
        '[p1:Lisbon,fly,Noted]'
    """

    def __init__(
        self,
        *,
        max_tokens: int,
        low_water_tokens: int | None = None,
        boundary: str | BoundaryStrategy = "fixed_20",
        policy: str | EvictionPolicy = "fifo",
        store: BaseStore | None = None,
        model: str | None = None,
        encoding: str | None = None,
        token_counter: Callable | None = None,
        bookmarker: Callable | None = None,
        recall_max_tokens: int | None = None,
        recent_messages: int = 6,
        search_results: int = 2,
        input_messages_key: str = "messages",
        output_messages_key: str = "messages",
        name: str = "paging",
    ) -> None:
        self.config = PagingConfig(
            max_tokens=max_tokens,
            low_water_tokens=low_water_tokens,
            boundary=boundary,
            policy=policy,
            mode="replace" if output_messages_key == input_messages_key else "view",
            model=model,
            encoding=encoding,
            token_counter=token_counter,
            bookmarker=bookmarker,
            recall_max_tokens=recall_max_tokens,
            recent_messages=recent_messages,
            search_results=search_results,
        )
        self.input_messages_key = input_messages_key
        self.output_messages_key = output_messages_key
        self.name = name
        self.page_store = PageStore(store)
        self.pager = Pager(self.config, self.page_store)
        self.recall_tool = make_recall_tool(self.pager)

    def _prepare(self, input: Any, config: RunnableConfig | None) -> tuple[list, str]:
        messages = input[self.input_messages_key] if isinstance(input, dict) else getattr(
            input, self.input_messages_key
        )
        thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
        if not thread_id:
            raise ValueError(
                "PagingNode needs a thread: invoke the graph with "
                "config={'configurable': {'thread_id': '...'}}."
            )
        self.page_store.bind(_graph_store())
        return messages, str(thread_id)

    def _output(self, result: PagingResult) -> dict[str, Any]:
        if self.config.mode == "replace":
            return {self.output_messages_key: result.updates}
        return {self.output_messages_key: result.view}

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        messages, thread_id = self._prepare(input, config)
        return self._output(self.pager.step(messages, thread_id))

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        messages, thread_id = self._prepare(input, config)
        return self._output(await self.pager.astep(messages, thread_id))
