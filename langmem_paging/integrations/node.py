"""`PagingNode`: paging as a Runnable node for hand-built `StateGraph`s (or a `pre_model_hook`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, Unpack

from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.config import get_store
from langgraph.graph import MessagesState
from langgraph.managed import RemainingSteps
from langgraph.store.base import BaseStore

from langmem_paging.config import Budget, PagingConfig, PagingOptions
from langmem_paging.core.lru import LRU
from langmem_paging.core.state import STATE_KEY, paging_reducer
from langmem_paging.core.tokens import foreign_model_warning
from langmem_paging.index.base import SearchIndex
from langmem_paging.integrations.graph_state import GraphCall, paging_value, thread_id_of
from langmem_paging.integrations.graph_step import CallResources, GraphStep, ThreadLifecycle
from langmem_paging.runtime.engine import OnStoreError, warn
from langmem_paging.step import PagingResult
from langmem_paging.storage.page_store import PageStore

__all__ = ["PagingMessagesState", "PagingNode"]


class PagingMessagesState(MessagesState):
    """`MessagesState` plus the paging state: use it (or add the ``paging`` key) with `PagingNode`,
    in a `StateGraph` or as the ``state_schema`` of LangGraph's prebuilt ReAct agent with the node
    as its ``pre_model_hook`` (which needs ``remaining_steps``, a managed value LangGraph fills)."""

    paging: NotRequired[Annotated[dict[str, Any], paging_reducer]]
    remaining_steps: NotRequired[RemainingSteps]


def _graph_store() -> BaseStore | None:
    try:
        return get_store()
    except RuntimeError:  # called outside a graph run
        return None


class PagingNode(ThreadLifecycle, Runnable[dict[str, Any], dict[str, Any]]):
    """Pages the messages of a graph state before the model node.

    The state needs a ``paging`` key (`PagingMessagesState`), where the node keeps what decides
    the view, so forks and time travel stay consistent. With ``output_messages_key ==
    input_messages_key`` (default ``"messages"``) it returns `add_messages` updates: bookmarks
    replace pages in state. With another key, e.g. ``"llm_input_messages"`` for a
    `pre_model_hook`, it returns the paged view under that key and leaves the history in state
    untouched. Give the model `node.recall_tool` (and route its calls to a `ToolNode`). The node
    does not see the system prompt or tool schemas: leave room for them in `max_tokens`.

    Args:
        config: A `PagingConfig`; or the budget, `max_tokens` (``PagingNode(4000, policy="lfu")``),
            with the other options as keywords (or ``max_tokens=...`` too).
        store: Where pages go; default the graph's store.
        input_messages_key: State key holding the messages.
        output_messages_key: State key to write (see above).
        name: The node's name.
        ttl, index, on_store_error: As in `PagingMiddleware`.
        **options: `PagingConfig` options.

    Example:
        >>> from langgraph.graph import StateGraph, START
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from langgraph.store.memory import InMemoryStore
        >>> paging = PagingNode(max_tokens=60, boundary="fixed_2")
        >>> def reply(state):
        ...     return {"messages": [("ai", "Noted.")]}
        >>> graph = (
        ...     StateGraph(PagingMessagesState)
        ...     .add_node("paging", paging)
        ...     .add_node("reply", reply)
        ...     .add_edge(START, "paging")
        ...     .add_edge("paging", "reply")
        ...     .compile(checkpointer=InMemorySaver(), store=InMemoryStore())
        ... )
        >>> config = {"configurable": {"thread_id": "t1"}}
        >>> for city in ["Lisbon", "Kyoto", "Quito", "Oslo", "Rome", "Lima"]:
        ...     state = graph.invoke({"messages": [("user", f"I will fly to {city}.")]}, config)
        >>> [m.content for m in state["messages"]]  # four pages folded into one cluster bookmark
        ['[c7:Kyoto,Lisbon,Oslo,Quito,fly,Noted|p1-p4]', 'I will fly to Rome.', 'Noted.', 'I will fly to Lima.', 'Noted.']
    """

    _owner = "PagingNode"

    def __init__(
        self,
        config: PagingConfig | Budget | None = None,
        *,
        max_tokens: Budget | None = None,
        store: BaseStore | None = None,
        input_messages_key: str = "messages",
        output_messages_key: str = "messages",
        name: str = "paging",
        ttl: float | None = None,
        index: SearchIndex | None = None,
        on_store_error: OnStoreError = "raise",
        **options: Unpack[PagingOptions],
    ) -> None:
        mode: Literal["replace", "view"] = "replace" if output_messages_key == input_messages_key else "view"
        resources: CallResources = {
            "store": store,
            "ttl": ttl,
            "index": index,
            "on_store_error": on_store_error,
        }
        self._page_with(GraphStep(config, max_tokens, options, mode, **resources))
        if self.config.calibrate:
            raise ValueError(
                "Invalid paging option `calibrate`: it learns from the model's responses, which a "
                "PagingNode does not see. Use PagingMiddleware with create_agent, or drop `calibrate`."
            )
        if self.config.mode != mode:
            raise ValueError(
                f"`mode={self.config.mode!r}` does not match the keys: output_messages_key == "
                "input_messages_key rewrites the state (replace); another key returns a view (view)."
            )
        self.input_messages_key = input_messages_key
        self.output_messages_key = output_messages_key
        self.name = name
        if self.config.token_counter is None and self.config.encoding is None:
            # the node never sees the model it pages for: only `model=` tells which one it is
            message = foreign_model_warning(self.config.model, self.pager.encoding_for())
            if message:
                warn(message)
        # view mode keeps no bookmark in state: which threads this node paged tells a dropped `paging` key
        self._threads_paged: LRU[str, bool] = LRU(10_000)

    @property
    def page_store(self) -> PageStore:
        """The page store given as ``store=``; without one, the store of the graph the node pages in
        (an error before its first call, or when it served graphs with different stores)."""
        return self.paging.page_store("PagingNode")

    def _prepare(self, input: Any, config: RunnableConfig | None) -> GraphCall:
        state = input if isinstance(input, dict) else vars(input)
        thread_id = thread_id_of(config=config or {})
        value = paging_value(
            state, self.input_messages_key, paged_before=bool(self._threads_paged.get(thread_id))
        )
        return self.paging.prepare(list(state[self.input_messages_key]), value, thread_id)

    def _output(self, result: PagingResult, call: GraphCall) -> dict[str, Any]:
        update = call.update(result)
        if STATE_KEY in update:
            self._threads_paged.put(call.thread_id, True)
        if self.config.mode == "view":
            update[self.output_messages_key] = result.view
        return update

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        call = self._prepare(input, config)
        return self._output(self.pager.step(**call.step_input(), store=_graph_store()), call)

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        call = self._prepare(input, config)
        return self._output(await self.pager.astep(**call.step_input(), store=_graph_store()), call)
