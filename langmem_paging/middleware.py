"""`PagingMiddleware` for `langchain.agents.create_agent`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, NotRequired, Unpack, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AnyMessage, BaseMessage
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.types import Command

from langmem_paging.config import Budget, PagingConfig, PagingOptions
from langmem_paging.engine import OnStoreError
from langmem_paging.graph_state import prepare_view, state_update
from langmem_paging.messages import recall_copy_pages
from langmem_paging.pager import Pager
from langmem_paging.recall.tool import make_recall_tool
from langmem_paging.search import SearchIndex
from langmem_paging.state import STATE_KEY, paging_reducer
from langmem_paging.step import PagingResult
from langmem_paging.store import PageStore

__all__ = ["PagingAgentState", "PagingMiddleware", "prepare_view", "state_update", "thread_id_of"]


class PagingAgentState(AgentState):
    """`create_agent`'s state plus the paging state (added by the middleware itself)."""

    paging: NotRequired[Annotated[dict, paging_reducer]]


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

    Before each model call, when what the model would receive (system prompt, tool schemas,
    messages) exceeds `max_tokens`, old messages are cut into pages, the policy evicts pages
    into the page store, and each evicted page is replaced at its place by a bookmark
    ``[pN:kw1,kw2,...]``; old bookmarks fold into cluster bookmarks. The middleware registers
    a `recall` tool and keeps its state in the graph (the ``paging`` key), so forks and time
    travel just work.

    Args:
        config: A `PagingConfig`; or pass its options as keywords (``max_tokens=...``).
        store: Where pages go; default the graph's store of each call (``create_agent(store=...)``),
            so one middleware serves any number of agents, each with its own store.
        ttl: Minutes after which the store may expire a thread's pages (stores with TTL support).
        index: Passage search for ``recall(query=...)`` (default in-process BM25).
        on_store_error: ``"raise"`` (default: the turn fails, the next one recovers) or
            ``"continue"`` (the turn goes on unpaged, with a warning).
        **options: `PagingConfig` options: `max_tokens` (required), `boundary`, `policy`, `mode`, ...

    Example:
        >>> from langchain.agents import create_agent
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from langgraph.store.memory import InMemoryStore
        >>> from langmem_paging.testing import ScriptedChatModel
        >>> store = InMemoryStore()
        >>> paging = PagingMiddleware(max_tokens=300, boundary="fixed_2", store=store)
        >>> model = ScriptedChatModel(responses=["Noted."] * 8)
        >>> agent = create_agent(model, middleware=[paging], checkpointer=InMemorySaver(), store=store)
        >>> config = {"configurable": {"thread_id": "t1"}}
        >>> for city in ["Lisbon", "Kyoto", "Quito", "Oslo"]:
        ...     state = agent.invoke({"messages": [f"I will fly to {city} on Friday."]}, config)
        >>> [m.content for m in state["messages"]]  # 300 tokens: the recall tool's schema takes 240
        ['[p1:Lisbon,Friday,fly,Noted]', '[p2:Kyoto,Friday,fly,Noted]', '[p3:Quito,Friday,fly,Noted]', 'I will fly to Oslo on Friday.', 'Noted.']
        >>> [m.content for m in paging.page_store.get("t1", "p1").messages]
        ['I will fly to Lisbon on Friday.', 'Noted.']
    """

    state_schema = PagingAgentState

    def __init__(
        self,
        config: PagingConfig | None = None,
        *,
        max_tokens: Budget | None = None,
        store: BaseStore | None = None,
        ttl: float | None = None,
        index: SearchIndex | None = None,
        on_store_error: OnStoreError = "raise",
        **options: Unpack[PagingOptions],
    ) -> None:
        super().__init__()
        if config is not None and (options or max_tokens is not None):
            raise TypeError("Pass either `config=PagingConfig(...)` or paging options as keywords, not both.")
        if max_tokens is not None:
            options = {**options, "max_tokens": max_tokens}  # type: ignore[typeddict-unknown-key]
        self.config = config if config is not None else PagingConfig(**options)
        page_store = PageStore(store, ttl=ttl) if store is not None else None
        self.pager = Pager(self.config, page_store, index=index, on_store_error=on_store_error, ttl=ttl)
        self.tools = [make_recall_tool(self.pager)]

    @property
    def page_store(self) -> PageStore:
        """The page store given as ``store=`` (with none, each call uses its graph's store: read
        pages with ``PageStore(graph_store)``)."""
        if self.pager.page_store is None:
            raise ValueError(
                "This PagingMiddleware has no store of its own: each call uses its graph's store. Read pages "
                "with `PageStore(store)` over that store, or pass `store=` to the middleware."
            )
        return self.pager.page_store

    def _prepare(self, request: ModelRequest, counter):
        runtime = request.runtime
        overhead = (counter.count_message(request.system_message) if request.system_message else 0)
        overhead += counter.count_tools(request.tools or [])
        state = request.state.get(STATE_KEY) if isinstance(request.state, dict) else None
        view, positions = prepare_view(request.messages, state, self.config.mode)
        return thread_id_of(runtime), state, view, overhead, positions

    def _respond(self, request: ModelRequest, response: ModelResponse, result: PagingResult, state: Any,
                 positions: dict[int, int]):
        update = state_update(result, request.messages, state, self.config.mode, positions)
        if not update:
            return response
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | ExtendedModelResponse:
        thread_id, state, view, overhead, positions = self._prepare(request, self.pager.counter_for(request.model))
        result = self.pager.step(view, state, thread_id, store=_store_of(request), overhead=overhead,
                                 model=request.model)
        with traced(result, overhead):
            response = handler(request.override(messages=_as_any_messages(result.view)))
        return self._respond(request, response, result, state, positions)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse | ExtendedModelResponse:
        counter = await self.pager.acounter_for(request.model)
        thread_id, state, view, overhead, positions = self._prepare(request, counter)
        result = await self.pager.astep(view, state, thread_id, store=_store_of(request), overhead=overhead,
                                        model=request.model)
        with traced(result, overhead):
            response = await handler(request.override(messages=_as_any_messages(result.view)))
        return self._respond(request, response, result, state, positions)


def run_metadata(result: PagingResult, overhead: int) -> dict[str, Any]:
    """What paging did on a model call, as run metadata (flat keys: LangSmith filters on them).
    Tokens count messages; the system prompt and tool schemas (`paging_overhead`) come on top."""
    return {
        "paging_tokens_before": result.tokens_before, "paging_tokens": result.tokens,
        "paging_max_tokens": result.state.budget + overhead, "paging_overhead": overhead,
        "paging_message_budget": result.state.budget, "paging_protected_tokens": result.protected_tokens,
        "paging_formed": len(result.formed), "paging_evicted": len(result.evicted),
        "paging_folded": len(result.folded), "paging_over_budget": result.over_budget,
        "paging_recall_results": sum(1 for m in result.view if recall_copy_pages(m)),
    }


@contextmanager
def traced(result: PagingResult, overhead: int) -> Iterator[None]:
    """Run the model call under a config carrying `run_metadata` and the ``langmem-paging`` tag:
    the model's run (what LangSmith and any LangChain tracer record) shows what paging did."""
    config = var_child_runnable_config.get() or {}
    tags = ["langmem-paging", *(["paging:evicted"] if result.evicted else []),
            *(["paging:over-budget"] if result.over_budget else [])]
    token = var_child_runnable_config.set({
        **config,
        "metadata": {**(config.get("metadata") or {}), **run_metadata(result, overhead)},
        "tags": [*(config.get("tags") or []), *tags],
    })
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)


def _as_any_messages(view: list[BaseMessage]) -> list[AnyMessage]:
    """The view as the request's message type (every message the step makes is a concrete one)."""
    return cast(list[AnyMessage], view)


def _store_of(request: ModelRequest) -> BaseStore | None:
    """The store of the graph running this call."""
    return getattr(request.runtime, "store", None)
