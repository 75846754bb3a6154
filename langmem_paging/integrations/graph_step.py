"""The graph-facing paging step: read a graph's state, page, build the state update.

Every caller that pages a graph's state goes through here: `PagingMiddleware`, `PagingNode`, the
recall tool (for the view a search ranks), `PagingThread`, the scale benchmark and the fuzzer.
`GraphCall.prepare` reads what a step starts from (the view, and in view mode where its messages
sit in the state), `GraphStep.step`/`astep` page it, and `GraphCall.update` builds the graph update;
what passes between the three stays inside the `GraphCall`. The thread-id lookup, the check for a
missing ``paging`` key and the construction the middleware and the node share live here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.store.base import BaseStore

from langmem_paging.config import Budget, PagingConfig, PagingOptions, check_call_options, check_thread_id
from langmem_paging.core.messages import is_bookmark
from langmem_paging.core.state import STATE_KEY
from langmem_paging.integrations.engine import OnStoreError
from langmem_paging.integrations.graph_state import prepare_view, state_update
from langmem_paging.integrations.graph_stores import GraphStores
from langmem_paging.integrations.pager import Pager
from langmem_paging.step import PagingResult
from langmem_paging.storage.page_store import PageStore

__all__ = ["MISSING_STATE", "NO_THREAD", "GraphCall", "GraphStep", "find_thread_id", "paging_value",
           "thread_id_of"]

Mode = Literal["replace", "view"]

MISSING_STATE = (
    "The graph state has no `paging` key, so paging cannot keep its state in the checkpoint (every turn "
    "would page the history again). Use `langmem_paging.PagingMessagesState` as the state schema (or add "
    "`paging: NotRequired[PagingChannel]` to yours); `create_agent` with `PagingMiddleware` does this "
    "for you."
)
"""The one error for a graph whose state has no ``paging`` channel."""

NO_THREAD = (
    "Paging needs a thread: invoke the graph with config={'configurable': {'thread_id': '...'}} "
    "(and a checkpointer)."
)
"""The one error for a run without a thread id."""


def find_thread_id(config: RunnableConfig | Mapping[str, Any] | None = None, runtime: Any = None) -> str | None:
    """The running graph's thread id, from a runtime (its execution info), else a config, else the
    config of the running graph; None when the run has none."""
    info = getattr(runtime, "execution_info", None)
    thread_id = getattr(info, "thread_id", None)
    if not thread_id:
        thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
    if not thread_id and config is None:
        from langgraph.config import get_config

        try:
            thread_id = get_config().get("configurable", {}).get("thread_id")
        except RuntimeError:  # outside a graph run
            thread_id = None
    return check_thread_id(str(thread_id)) if thread_id not in (None, "") else None


def thread_id_of(runtime: Any = None, config: RunnableConfig | Mapping[str, Any] | None = None) -> str:
    """`find_thread_id`, required.

    Raises:
        ValueError: When the run has no thread id (`NO_THREAD`), or one no store can key.
    """
    thread_id = find_thread_id(config, runtime)
    if thread_id is None:
        raise ValueError(NO_THREAD)
    return thread_id


def paging_value(state: Mapping[str, Any], messages_key: str = "messages", *, paged_before: bool = False) -> Any:
    """The ``paging`` value of a graph state (None before the first step wrote one).

    A state without the key whose messages hold a bookmark was paged by a step whose update the
    graph dropped: its schema has no ``paging`` channel. The scan only runs while the key is absent,
    that is while nothing was paged yet, when the messages fit the budget: it never grows with the
    history. `paged_before`: the caller knows otherwise that this thread was paged (view mode, whose
    state keeps no bookmark).

    Raises:
        ValueError: `MISSING_STATE`, naming the state schema to use.
    """
    if STATE_KEY in state:
        return state[STATE_KEY]
    if paged_before or any(is_bookmark(m) for m in state.get(messages_key) or ()):
        raise ValueError(MISSING_STATE)
    return None


@dataclass(frozen=True)
class GraphCall:
    """One step's run context: what it read from the graph state, from which its update is built."""

    messages: Sequence[BaseMessage]
    """The state's messages (replace mode: bookmarks in place of pages; view mode: the whole history)."""
    state: Any
    """The ``paging`` value of the branch (None before any step)."""
    mode: Mode
    """`replace` or `view` (see `PagingConfig.mode`)."""
    view: list[BaseMessage]
    """The messages the step pages: `messages` (replace) or the view the last step left (view)."""
    positions: dict[int, int]
    """View mode: where each view message sits in `messages`, which the update needs to rebuild the
    skeleton (kept as `prepare_view` made it: the update reads it, nothing writes it)."""
    thread_id: str = ""
    """The graph's thread ("" for a step without a store)."""

    @classmethod
    def prepare(cls, messages: Sequence[BaseMessage], state: Any, mode: Mode, thread_id: str = "") -> GraphCall:
        """The call over `messages` and the ``paging`` value `state`."""
        view, positions = prepare_view(messages, state, mode)
        return cls(messages, state, mode, view, positions, thread_id)

    def update(self, result: PagingResult) -> dict[str, Any]:
        """The graph update after `result`: the new paging state (if it changed) and, in replace
        mode, the message updates."""
        return state_update(result, self.messages, self.state, self.mode, self.positions)


class GraphStep:
    """Paging for one configuration as a graph runs it: the middleware's and the node's shared parts.

    Args:
        config: A `PagingConfig`, or None to build one from `options` (and `max_tokens`).
        max_tokens: The budget, when given beside `options`.
        store, ttl, index, on_store_error: As in `PagingMiddleware`.
        options: `PagingConfig` options.
        default_mode: The mode when `options` names none (the node's follows its keys).

    Raises:
        TypeError: When both `config` and options are given.
        ValueError: For a bad option, naming it.
    """

    def __init__(
        self,
        config: PagingConfig | None = None,
        *,
        max_tokens: Budget | None = None,
        store: BaseStore | None = None,
        ttl: float | None = None,
        index: Any = None,
        on_store_error: OnStoreError = "raise",
        options: PagingOptions | None = None,
        default_mode: Mode | None = None,
    ) -> None:
        given: dict[str, Any] = dict(options or {})
        if max_tokens is not None:
            given["max_tokens"] = max_tokens
        if config is not None and given:
            raise TypeError("Pass either `config=PagingConfig(...)` or paging options as keywords, not both.")
        if config is None:
            if default_mode is not None:
                given.setdefault("mode", default_mode)
            config = PagingConfig(**given)
        check_call_options(ttl=ttl, index=index)
        self.config = config
        """The validated options."""
        self.pager = Pager(config, PageStore(store, ttl=ttl) if store is not None else None, index=index,
                           on_store_error=on_store_error, ttl=ttl)
        """Steps and recalls with each call's resources."""
        from langmem_paging.integrations.recall_tool import make_recall_tool

        self.recall_tool: BaseTool = make_recall_tool(self.pager, name=config.tool_name)
        """The tool the model calls to bring pages back."""
        self.graph_stores = GraphStores()
        """The graph stores calls came with (weakly held), for `page_store`."""

    def page_store(self, owner: str) -> PageStore:
        """The page store `owner` reads pages from (see `GraphStores.page_store`)."""
        return self.graph_stores.page_store(self.pager, owner)

    def prepare(self, messages: Sequence[BaseMessage], state: Any, thread_id: str) -> GraphCall:
        """The call over `messages` and the ``paging`` value `state` in this configuration's mode."""
        return GraphCall.prepare(messages, state, self.config.mode, thread_id)

    def step(self, call: GraphCall, *, store: BaseStore | None = None, overhead: int = 0, model: Any = None,
             max_tokens: int | None = None) -> PagingResult:
        """Page `call`'s view; new records are stored before the result returns (see `Pager.step`)."""
        self.graph_stores.add(store)
        return self.pager.step(call.view, call.state, call.thread_id, store=store, overhead=overhead, model=model,
                               max_tokens=max_tokens)

    async def astep(self, call: GraphCall, *, store: BaseStore | None = None, overhead: int = 0,
                    model: Any = None, max_tokens: int | None = None) -> PagingResult:
        """Async `step`."""
        self.graph_stores.add(store)
        return await self.pager.astep(call.view, call.state, call.thread_id, store=store, overhead=overhead,
                                      model=model, max_tokens=max_tokens)
