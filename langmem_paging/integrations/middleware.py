"""`PagingMiddleware` for `langchain.agents.create_agent`."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import FrameType
from typing import Annotated, Any, NotRequired, Unpack, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ExtendedModelResponse
from langchain_core.messages import AnyMessage
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import BaseTool
from langgraph.store.base import BaseStore
from langgraph.types import Command

from langmem_paging.config import Budget, PagingConfig, PagingOptions
from langmem_paging.core.blocks import for_model
from langmem_paging.core.messages import recall_copy_pages, rewrites_all
from langmem_paging.core.state import paging_reducer
from langmem_paging.core.tokens import TokenCounter, foreign_model_warning
from langmem_paging.index.base import SearchIndex
from langmem_paging.integrations.calibration import (
    CALIBRATION_KEY,
    Calibration,
    is_context_overflow,
    provider_input_tokens,
    stated_limit,
)
from langmem_paging.integrations.graph_state import (
    GraphCall,
    paging_value,
    prepare_view,
    state_update,
    thread_id_of,
)
from langmem_paging.integrations.graph_step import GraphStep, ThreadLifecycle
from langmem_paging.runtime.engine import OnStoreError, warn
from langmem_paging.step import PagingResult
from langmem_paging.storage.page_store import PageStore

__all__ = ["PagingAgentState", "PagingMiddleware", "prepare_view", "state_update", "thread_id_of"]


class PagingAgentState(AgentState):
    """`create_agent`'s state plus the paging state (added by the middleware itself)."""

    paging: NotRequired[Annotated[dict[str, Any], paging_reducer]]
    paging_calibration: NotRequired[dict[str, Any]]


@dataclass(frozen=True)
class _Call:
    """What one model call pages: read from the request, never kept on the middleware."""

    graph: GraphCall
    """What the step reads from the graph state (the view, the branch's paging value, the thread)."""
    overhead: int
    """Tokens of the system prompt and tool schemas."""
    store: BaseStore | None
    """The graph's store."""
    calibration: Calibration
    """The thread's corrections to the budget."""
    max_tokens: int
    """This call's budget (the configured one, corrected by `calibration`)."""
    configured: int
    """`max_tokens` as configured (resolved for this call's model)."""
    counter: TokenCounter
    """The tokenizer of this call (its prompt's and its step's)."""

    def step_input(self, model: Any) -> dict[str, Any]:
        """What `Pager.step` takes for this call: the graph's view, state and thread, and the call's
        store, overhead, model, budget and tokenizer."""
        return {
            **self.graph.step_input(),
            "store": self.store,
            "overhead": self.overhead,
            "model": model,
            "max_tokens": self.max_tokens,
            "counter": self.counter,
        }

    def refused(self, result: PagingResult, error: BaseException) -> _Call:
        """The call again after the provider refused its prompt (`result`) as too long: 80% of the
        least of the budget, the refused prompt and the limit the error states (`Calibration.shrunk`).
        A refused prompt within the budget means ``max_tokens`` is above the model's window: warned
        (once, as Python shows a warning)."""
        refused, limit = result.tokens + self.overhead, stated_limit(error)
        if refused <= self.max_tokens:
            stated = f" (its limit: {limit} tokens)" if limit else ""
            warn(
                f"langmem-paging: the provider refused a prompt within max_tokens={self.configured} as too "
                f"long{stated}: max_tokens is above the model's context window. This thread now pages to 80% "
                "of what was refused; set max_tokens below the model's window (or calibrate=True)."
            )
        calibration = self.calibration.shrunk(self.configured, refused=refused, limit=limit)
        return replace(self, calibration=calibration, max_tokens=calibration.budget(self.configured))


class PagingMiddleware(ThreadLifecycle, AgentMiddleware):
    """Cooperative memory paging for `create_agent`: bookmarks in place, `recall` to bring pages back.

    Before each model call, when what the model would receive (system prompt, tool schemas,
    messages) exceeds `max_tokens`, old messages are cut into pages, the policy evicts pages
    into the page store, and each evicted page is replaced at its place by a bookmark
    ``[pN:kw1 kw2 ...]``; old bookmarks fold into cluster bookmarks. The middleware registers
    a `recall` tool (named by ``tool_name``) and keeps its state in the graph (the ``paging``
    key), so forks and time travel just work.

    When the provider still refuses a prompt as too long (LangChain's `ContextOverflowError`,
    OpenAI's ``context_length_exceeded``, Anthropic's "prompt is too long"), the call is paged to
    80% of the least of its budget, the refused prompt and the limit the error states, and retried
    once; the thread keeps the smaller budget (a second refusal is raised as the provider's error).
    A refused prompt within the budget warns that ``max_tokens`` is above the model's window.

    Args:
        config: A `PagingConfig`; or the budget, `max_tokens` (``PagingMiddleware(4000, policy="lfu")``),
            with the other options as keywords (or ``max_tokens=...`` too).
        store: Where pages go; default the graph's store of each call (``create_agent(store=...)``),
            so one middleware serves any number of agents, each with its own store.
        ttl: Minutes after which the store may expire a thread's pages (stores with TTL support).
        index: Passage search for ``recall(query=...)`` (default: FTS5 in a SqliteStore's file, else
            in-process BM25).
        on_store_error: ``"raise"`` (default: the turn fails, the next one recovers) or
            ``"continue"`` (the turn goes on unpaged, with a warning).
        **options: `PagingConfig` options: `max_tokens` (required), `boundary`, `policy`, `mode`,
            `tool_name`, `token_counter`, `calibrate`, ...

    Raises:
        ValueError, TypeError: For a bad option, naming it; when the agent is built with a tool of
            paging's tool name (rename paging's with ``tool_name=``).
        ValueError: At a call, when the run has no thread id, or when the graph's state lost the
            ``paging`` key after paging (a state schema without it): the error names the schema to use.

    Example:
        >>> from langchain.agents import create_agent
        >>> from langgraph.checkpoint.memory import InMemorySaver
        >>> from langgraph.store.memory import InMemoryStore
        >>> from langmem_paging.testing import ScriptedChatModel
        >>> store = InMemoryStore()
        >>> paging = PagingMiddleware(max_tokens=170, boundary="fixed_2", bookmark_share=0.3, store=store)
        >>> model = ScriptedChatModel(responses=["Noted."] * 8)
        >>> agent = create_agent(model, middleware=[paging], checkpointer=InMemorySaver(), store=store)
        >>> config = {"configurable": {"thread_id": "t1"}}
        >>> for city in ["Lisbon", "Kyoto", "Quito", "Oslo"]:
        ...     state = agent.invoke({"messages": [f"I will fly to {city} on Friday."]}, config)
        >>> [m.content for m in state["messages"]]  # 170 tokens: the recall tool's schema takes 116
        ['[p1:Lisbon fly Noted,Friday]', '[p2:Kyoto fly Noted,Friday]', '[p3:Quito fly Noted,Friday]', 'I will fly to Oslo on Friday.', 'Noted.']
        >>> [m.content for m in paging.page_store.get("t1", "p1").messages]
        ['I will fly to Lisbon on Friday.', 'Noted.']
    """

    state_schema = PagingAgentState

    def __init__(
        self,
        config: PagingConfig | Budget | None = None,
        *,
        max_tokens: Budget | None = None,
        store: BaseStore | None = None,
        ttl: float | None = None,
        index: SearchIndex | None = None,
        on_store_error: OnStoreError = "raise",
        **options: Unpack[PagingOptions],
    ) -> None:
        super().__init__()
        self._page_with(
            GraphStep(
                config, max_tokens, options, store=store, ttl=ttl, index=index, on_store_error=on_store_error
            )
        )

    @property
    def tools(self) -> list[BaseTool]:  # type: ignore[override]
        """Paging's recall tool. `create_agent` reads this while it builds the agent: a tool of the
        agent's own with the same name would silently replace it, so that is refused here."""
        refuse_tool_clash(self.recall_tool, _tools_of_agent_being_built())
        return [self.recall_tool]

    @property
    def page_store(self) -> PageStore:
        """The page store given as ``store=``; without one, the store of the graph the middleware
        pages in (an error before its first call, or when it served graphs with different stores:
        then read pages with ``PageStore(graph_store)``)."""
        return self.paging.page_store("PagingMiddleware")

    def _prepare(self, request: ModelRequest, counter: TokenCounter) -> _Call:
        refuse_tool_clash(self.recall_tool, request.tools or [])
        store: BaseStore | None = getattr(request.runtime, "store", None)  # the graph's
        if self.config.token_counter is None and self.config.encoding is None:
            message = foreign_model_warning(self.config.model or request.model, counter.encoding.name)
            if message:
                warn(message)
        custom = self.config.token_counter
        system = request.system_message
        overhead = (
            0 if system is None else (counter.count_message(system) if custom is None else custom([system]))
        )
        overhead += counter.count_tools(request.tools or [])
        state = request.state if isinstance(request.state, dict) else {}
        calibration = Calibration.from_value(state.get(CALIBRATION_KEY))
        graph = self.paging.prepare(request.messages, paging_value(state), thread_id_of(request.runtime))
        configured = self.pager.max_tokens_for(request.model)
        return _Call(graph, overhead, store, calibration, calibration.budget(configured), configured, counter)

    def _respond(
        self, request: ModelRequest, response: ModelResponse, result: PagingResult, call: _Call
    ) -> ModelResponse | ExtendedModelResponse:
        update = call.graph.update(result)
        if rewrites_all(update.get("messages", [])):
            # `create_agent` applies the model's answer before this update: the rewrite ends with it again
            update["messages"] = [*update["messages"], *response.result]
        calibration = call.calibration
        provider = (
            provider_input_tokens(response.result[-1]) if self.config.calibrate and response.result else None
        )
        if provider is not None:
            calibration = calibration.observed(estimate=result.tokens + call.overhead, provider=provider)
        if calibration != Calibration.from_value(
            request.state.get(CALIBRATION_KEY) if isinstance(request.state, dict) else None
        ):
            update[CALIBRATION_KEY] = calibration.to_value()
        if not update:
            return response
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse | ExtendedModelResponse:
        call = self._prepare(request, self.pager.counter_for(request.model))
        for retried in (False, True):  # once: a second refusal is the provider's error, raised as is
            result = self.pager.step(**call.step_input(request.model))
            try:
                with traced(result, call, retried=retried):
                    response = handler(_paged(request, result))
                break
            except Exception as error:
                if retried or not is_context_overflow(error):
                    raise
                call = call.refused(result, error)
        return self._respond(request, response, result, call)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse | ExtendedModelResponse:
        call = self._prepare(request, await self.pager.acounter_for(request.model))
        for retried in (False, True):  # once: a second refusal is the provider's error, raised as is
            result = await self.pager.astep(**call.step_input(request.model))
            try:
                with traced(result, call, retried=retried):
                    response = await handler(_paged(request, result))
                break
            except Exception as error:
                if retried or not is_context_overflow(error):
                    raise
                call = call.refused(result, error)
        return self._respond(request, response, result, call)


def refuse_tool_clash(paging_tool: BaseTool, tools: Sequence[Any]) -> None:
    """Refuse an agent tool named like paging's recall tool: LangChain keeps one tool per name, so
    one of the two would silently never be called.

    Raises:
        ValueError: Naming both tools and the option that renames paging's.
    """
    for tool in tools:
        name = tool.get("name") if isinstance(tool, dict) else getattr(tool, "name", None)
        if name is None and callable(tool):
            name = getattr(tool, "__name__", None)
        if name == paging_tool.name and tool is not paging_tool:
            raise ValueError(
                f"Two tools are named {name!r}: the agent's tool {_describe(tool)} and PagingMiddleware's recall "
                "tool; LangChain keeps one per name, so the other would never be called. Rename paging's with "
                "PagingMiddleware(tool_name='memory_recall', ...), or rename yours."
            )


def _describe(tool: Any) -> str:
    """Where a tool comes from: the function behind it, else its class."""
    if isinstance(tool, dict):
        return "a provider tool"
    func = getattr(tool, "func", None) or getattr(tool, "coroutine", None) or tool
    name = getattr(func, "__qualname__", None) or type(tool).__qualname__
    return f"{getattr(func, '__module__', None) or type(tool).__module__}.{name}"


def _tools_of_agent_being_built() -> Sequence[Any]:
    """The ``tools=`` of the `create_agent` call reading `PagingMiddleware.tools`, if that is who reads.

    create_agent offers middleware no hook at build time, and it puts middleware tools before the
    agent's in a dict keyed by name (the agent's own silently win). Its ``tools`` argument is on the
    caller's frame: reading it lets the clash fail where the agent is built, not at its first call
    (`_prepare` checks again there, for agents built another way)."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(4):  # create_agent -> (its comprehension, 3.11) -> getattr -> this property
        if frame is None:
            return ()
        if frame.f_code is _CREATE_AGENT_CODE:
            tools = frame.f_locals.get("tools")
            middleware = frame.f_locals.get("middleware")
            found = list(tools) if isinstance(tools, (list, tuple)) else []
            for other in middleware if isinstance(middleware, (list, tuple)) else ():
                # another PagingMiddleware's tools property would read this one's: take its tool directly
                found += (
                    [other.recall_tool]
                    if isinstance(other, PagingMiddleware)
                    else getattr(other, "tools", [])
                )
            return found
        frame = frame.f_back
    return ()


def _create_agent_code() -> Any:
    import inspect

    from langchain.agents import factory

    return getattr(inspect.unwrap(factory.create_agent), "__code__", None)


_CREATE_AGENT_CODE = _create_agent_code()


def run_metadata(result: PagingResult, call: _Call, *, retried: bool = False) -> dict[str, Any]:
    """What paging did on a model call, as run metadata (flat keys: LangSmith filters on them).
    Tokens count messages; the system prompt and tool schemas (`paging_overhead`) come on top.
    `paging_max_tokens` is this call's budget (the configured one corrected by calibration and
    context-length errors: `paging_calibration`, `paging_budget_scale`)."""
    return {
        "paging_tokens_before": result.tokens_before,
        "paging_tokens": result.tokens,
        "paging_max_tokens": call.max_tokens,
        "paging_overhead": call.overhead,
        "paging_message_budget": result.state.budget,
        "paging_protected_tokens": result.protected_tokens,
        "paging_formed": len(result.formed),
        "paging_evicted": len(result.evicted),
        "paging_folded": len(result.folded),
        "paging_over_budget": result.over_budget,
        "paging_recall_results": sum(1 for m in result.view if recall_copy_pages(m)),
        "paging_calibration": call.calibration.ratio,
        "paging_budget_scale": call.calibration.scale,
        "paging_overflow_retry": retried,
    }


@contextmanager
def traced(result: PagingResult, call: _Call, *, retried: bool = False) -> Iterator[None]:
    """Run the model call under a config carrying `run_metadata` and the ``langmem-paging`` tag:
    the model's run (what LangSmith and any LangChain tracer record) shows what paging did."""
    config = var_child_runnable_config.get() or {}
    tags = [
        "langmem-paging",
        *(["paging:evicted"] if result.evicted else []),
        *(["paging:over-budget"] if result.over_budget else []),
        *(["paging:overflow-retry"] if retried else []),
    ]
    token = var_child_runnable_config.set(
        {
            **config,
            "metadata": {**(config.get("metadata") or {}), **run_metadata(result, call, retried=retried)},
            "tags": [*(config.get("tags") or []), *tags],
        }
    )
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)


def _paged(request: ModelRequest, result: PagingResult) -> ModelRequest:
    """The request with the paged view as its messages (the request's message type: every message the
    step makes is a concrete one), with placeholders for the images and files the model's profile
    says it cannot read."""
    return request.override(messages=cast(list[AnyMessage], for_model(result.view, request.model)))
