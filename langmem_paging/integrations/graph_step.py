"""The graph-facing paging step: read a graph's state, page, build the state update.

Every caller that pages a graph's state goes through here: `PagingMiddleware`, `PagingNode`, the
recall tool (for the view a search ranks), `PagingThread`, the scale benchmark and the fuzzer.
`GraphCall.prepare` reads what a step starts from (the view, and in view mode where its messages
sit in the state), `Pager.step`/`astep` page it (`GraphCall.step_input`), and `GraphCall.update`
builds the graph update; what passes between them stays inside the `GraphCall`. The thread-id lookup, the check for a
missing ``paging`` key and the construction the middleware and the node share live here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypedDict, Unpack

from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool
from langgraph.store.base import BaseStore

from langmem_paging.config import Budget, PagingConfig, PagingOptions, check_call_options
from langmem_paging.index.base import SearchIndex
from langmem_paging.integrations.graph_state import GraphCall
from langmem_paging.integrations.recall_tool import make_recall_tool
from langmem_paging.runtime.engine import OnStoreError
from langmem_paging.runtime.pager import Pager
from langmem_paging.step.result import PagingValue
from langmem_paging.storage.page_store import PageStore

__all__ = ["CallResources", "GraphStep", "ThreadLifecycle"]

Mode = Literal["replace", "view"]


class CallResources(TypedDict, total=False):
    """What a middleware or a node is given beside its options (each as in `PagingMiddleware`)."""

    store: BaseStore | None
    ttl: float | None
    index: SearchIndex | None
    on_store_error: OnStoreError


class GraphStep:
    """Paging for one configuration as a graph runs it: the middleware's and the node's shared parts.

    Args:
        config: A `PagingConfig`; or the budget (``4000``, ``("fraction", 0.5)``: `max_tokens`, the one
            required option, may come first); or None to build one from `options` and `max_tokens`.
        max_tokens: The budget, when given beside `options`.
        options: `PagingConfig` options.
        default_mode: The mode when `options` names none (the node's follows its keys).
        **resources: `CallResources`, as in `PagingMiddleware`.

    Raises:
        TypeError: When both `config` and options are given, or `max_tokens` twice.
        ValueError: For a bad option, naming it.
    """

    def __init__(
        self,
        config: PagingConfig | Budget | None,
        max_tokens: Budget | None,
        options: PagingOptions,
        default_mode: Mode | None = None,
        **resources: Unpack[CallResources],
    ) -> None:
        store, ttl, index = resources.get("store"), resources.get("ttl"), resources.get("index")
        given: dict[str, Any] = dict(options)
        if config is not None and not isinstance(config, PagingConfig):  # PagingMiddleware(4000)
            if max_tokens is not None:
                raise TypeError(
                    f"`max_tokens` given twice: first as {config!r}, then as max_tokens={max_tokens!r}."
                )
            config, max_tokens = (
                None,
                config,
            )  # PagingConfig checks it: an int, ('tokens', n), ('fraction', x)
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
        self.pager = Pager(
            config,
            PageStore(store, ttl=ttl) if store is not None else None,
            index=index,
            on_store_error=resources.get("on_store_error", "raise"),
            ttl=ttl,
        )
        """Steps and recalls with each call's resources."""
        self.recall_tool: BaseTool = make_recall_tool(self.pager, name=config.tool_name)
        """The tool the model calls to bring pages back."""

    def page_store(self, owner: str) -> PageStore:
        """The page store `owner` reads pages from (see `Pager.graph_page_store`)."""
        return self.pager.graph_page_store(owner)

    def prepare(self, messages: Sequence[BaseMessage], state: PagingValue, thread_id: str) -> GraphCall:
        """The call over `messages` and the ``paging`` value `state` in this configuration's mode."""
        return GraphCall.prepare(messages, state, self.config.mode, thread_id)


class ThreadLifecycle:
    """What a middleware and a node share: their `GraphStep` (`_page_with`), and `forget` and
    `delete_thread`, thin, over `PageStore.forget` / `delete_thread` (the lifecycle's one
    implementation), with the index the agent searches."""

    paging: GraphStep
    config: PagingConfig
    pager: Pager
    recall_tool: BaseTool
    _owner = "PagingMiddleware"

    def _page_with(self, step: GraphStep) -> None:
        """Keep `step` (this configuration's) with its options, pager and recall tool at hand."""
        self.paging, self.config = step, step.config
        self.pager, self.recall_tool = step.pager, step.recall_tool

    def _lifecycle(self) -> tuple[PageStore, Any]:
        page_store = self.paging.page_store(self._owner)
        return page_store, self.paging.pager.index_for(page_store)

    def forget(self, thread_id: str, message_id: str, **state: Any) -> list[str]:
        """Remove one message's text from everything the agent pages into: the page records, the
        cluster bookmarks, the keyword sketch, every search index (the one given as ``index=``, the
        store's default, and, through the thread's lifecycle generation, any other worker's
        in-process one) and the state the next prompt is built from (its next step follows the
        generation: no graph needed; ``graph=``/``checkpointer=`` correct the latest checkpoint now).
        Idempotent: run it again after a crash and it converges. Returns the ids of the pages that
        hold the message (see `PageStore.forget`). Words another message quotes stay with it."""
        page_store, index = self._lifecycle()
        return page_store.forget(thread_id, message_id, index=index, **state)

    async def aforget(self, thread_id: str, message_id: str, **state: Any) -> list[str]:
        """Async `forget`."""
        page_store, index = self._lifecycle()
        return await page_store.aforget(thread_id, message_id, index=index, **state)

    def delete_thread(self, thread_id: str) -> int:
        """Delete every record of the thread and its rows in every index (see `PageStore.delete_thread`);
        returns how many store records. Its checkpoints are the checkpointer's."""
        page_store, index = self._lifecycle()
        return page_store.delete_thread(thread_id, index=index)

    async def adelete_thread(self, thread_id: str) -> int:
        """Async `delete_thread`."""
        page_store, index = self._lifecycle()
        return await page_store.adelete_thread(thread_id, index=index)
