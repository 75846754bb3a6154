"""Pager: paging steps and recalls for one configuration, with the resources of each call.

What the middleware, the node and the recall tool hold. It keeps the configuration and the
strategy objects (policy, bookmarker, hooks: they keep their own bookkeeping), and nothing a
call brings: the store comes with each call (the graph's store, unless one was given), the
encoding from the model of each call (and, for a recall, from the branch's state), and the
search index is found for that store. One pager serves any number of graphs and stores.
"""

from __future__ import annotations

import asyncio
import threading
import warnings
import weakref
from collections.abc import Sequence
from typing import Any, Unpack

from langchain_core.messages import BaseMessage
from langgraph.store.base import BaseStore

from langmem_paging.config import PagingConfig, resolve_max_tokens
from langmem_paging.core.effects import arun, run
from langmem_paging.core.errors import PagingWarning, StorageError
from langmem_paging.core.state import PagingState
from langmem_paging.core.tokens import TokenCounter, encoding_for_model, loaded_counter, shared_counter
from langmem_paging.index.base import SearchIndex
from langmem_paging.index.defaults import default_index
from langmem_paging.recall.plan import RecallPlan, plan_recall
from langmem_paging.recall.request import RecallArgs
from langmem_paging.recall.service import RecallAnswer, RecallRequest, RecallService, resident_turns
from langmem_paging.runtime.engine import OnStoreError, StepCall, StepEngine
from langmem_paging.runtime.thread_io import ThreadIO
from langmem_paging.step import PagingResult, StepOptions, step_options
from langmem_paging.storage.page_store import PageStore

__all__ = ["Pager", "RecallAnswer", "RecallPlan", "plan_recall"]


class Pager:
    """Runs paging steps and recalls for one configuration.

    Args:
        config: The paging options.
        page_store: The page store to use whatever store a call brings (None: the graph's store of
            each call).
        index: Passage search (None: the default index of each call's store, `default_index`).
        on_store_error: ``"raise"`` (the turn fails; the next turn recovers, nothing lost) or
            ``"continue"`` (the turn goes on unpaged, with a warning).
        ttl: Minutes after which the store may expire records (for stores that come with calls).
        retries: Store call retries (for stores that come with calls).
    """

    def __init__(
        self,
        config: PagingConfig,
        page_store: PageStore | None = None,
        *,
        index: SearchIndex | None = None,
        on_store_error: OnStoreError = "raise",
        ttl: float | None = None,
        retries: int = 2,
    ) -> None:
        self.config = config
        self.engine = StepEngine(config, on_store_error=on_store_error)
        self.recalls = RecallService(
            config, bookmarker=self.engine.components.bookmarker, hooks=self.engine.hooks
        )
        self.page_store = page_store
        self.index = index
        self.ttl, self.retries = ttl, retries
        self._fallback: PageStore | None = None
        self._fallback_lock = threading.Lock()
        self._graph_stores: weakref.WeakSet[BaseStore] = weakref.WeakSet()
        """The graph stores calls came with (weakly held: it names them, it keeps none alive)."""

    # -- the resources of a call ----------------------------------------------------------
    def page_store_for(self, store: BaseStore | None) -> PageStore:
        """The page store of a call: the one given to the pager, else over the call's store, else an
        in-memory one of this pager's own (with a warning: pages are lost with the process)."""
        if self.page_store is not None:
            return self.page_store
        if store is not None:
            if store not in self._graph_stores:
                with self._fallback_lock:
                    self._graph_stores.add(store)
            return PageStore(store, ttl=self.ttl, retries=self.retries)
        with self._fallback_lock:
            if self._fallback is None:
                from langgraph.store.memory import InMemoryStore

                warnings.warn(
                    "langmem-paging: no store given to the middleware or the graph; evicted pages live only in "
                    "this process's memory and are lost when it exits. Pass store=SqliteStore(...) (or any "
                    "LangGraph store) to keep them.",
                    PagingWarning,
                    stacklevel=4,
                )
                self._fallback = PageStore(InMemoryStore(), retries=self.retries)
        return self._fallback

    def graph_page_store(self, owner: str) -> PageStore:
        """The page store `owner` (``"PagingMiddleware"``, ``"PagingNode"``) reads pages from: the one
        given, else the store every call so far came with (a middleware built without ``store=`` pages
        into the store of the graph running each call; "the pages of my agent" means that one).

        Raises:
            ValueError: Before any call, or when calls came with several stores (one middleware
                shared by agents over different stores: the question has no single answer).
        """
        if self.page_store is not None:
            return self.page_store
        with self._fallback_lock:
            stores = list(self._graph_stores)
        if len(stores) == 1:
            return self.page_store_for(stores[0])
        if not stores and self._fallback is not None:
            return self._fallback
        if not stores:
            raise ValueError(
                f"This {owner} has no store of its own and has not run yet, so it does not know its graph's "
                f"store. Pass `store=` to the {owner}, or read pages with `PageStore(store)` over the graph's store."
            )
        raise ValueError(
            f"This {owner} has no store of its own and has paged into {len(stores)} graph stores (one "
            f"{owner} shared by several agents). Read pages with `PageStore(store)` over the store you mean."
        )

    def index_for(self, page_store: PageStore) -> SearchIndex:
        """The search index of a call: the one given to the pager, else the store's default."""
        return (
            self.index
            if self.index is not None
            else default_index(page_store.store, self.config.search_embedder)
        )

    def encoding_for(self, model: Any = None, state: Any = None) -> str:
        """The tiktoken encoding of a call: `encoding`, else `model` from the config, else the model
        called, else the one the branch's last step used (a recall is not told the model)."""
        if self.config.encoding:
            return self.config.encoding
        chosen = self.config.model or model
        if chosen is None and state is not None:
            recorded = PagingState.from_value(state).encoding
            if recorded:
                return recorded
        return encoding_for_model(chosen)

    def counter_for(self, model: Any = None, state: Any = None) -> TokenCounter:
        """The tokenizer of a call (see `encoding_for`)."""
        return shared_counter(self.encoding_for(model, state))

    async def acounter_for(self, model: Any = None, state: Any = None) -> TokenCounter:
        """`counter_for`, loading an encoding not loaded yet in a worker thread (loading reads files)."""
        name = self.encoding_for(model, state)
        loaded = loaded_counter(name)
        return loaded if loaded is not None else await asyncio.to_thread(shared_counter, name)

    def max_tokens_for(self, model: Any = None) -> int:
        """`max_tokens` as an int (a fraction of the model's window is resolved here)."""
        return resolve_max_tokens(self.config.max_tokens, self.config.model if model is None else model)

    def options(self, *, max_tokens: int, overhead: int, counter: TokenCounter) -> StepOptions:
        """The step's options for a budget of `max_tokens` of which `overhead` is taken."""
        return step_options(
            self.config, self.engine.components, max_tokens=max_tokens, overhead=overhead, counter=counter
        )

    def _io(self, thread_id: str, store: BaseStore | None) -> ThreadIO:
        page_store = self.page_store_for(store)
        return ThreadIO(page_store, self.index_for(page_store), thread_id)

    def _call(
        self,
        view: Sequence[BaseMessage],
        state: Any,
        thread_id: str,
        store: BaseStore | None,
        options: StepOptions,
    ) -> StepCall:
        return StepCall(thread_id, view, state, options, self._io(thread_id, store))

    # -- paging -------------------------------------------------------------------------------
    def step(
        self,
        view: Sequence[BaseMessage],
        state: Any,
        thread_id: str,
        *,
        store: BaseStore | None = None,
        overhead: int = 0,
        model: Any = None,
        max_tokens: int | None = None,
    ) -> PagingResult:
        """Page `view` on `state`'s branch; new records are stored before the result returns.
        `max_tokens`: this call's budget, when the caller corrected the configured one. Under the
        thread's lock the step and its commit, then indexing, warnings, tracing and hooks; only failures
        of the page store and the index fall under `on_store_error`."""
        counter = self.counter_for(model)
        options = self.options(
            max_tokens=max_tokens or self.max_tokens_for(model), overhead=overhead, counter=counter
        )
        call, engine = self._call(view, state, thread_id, store, options), self.engine
        try:
            with engine.locks.hold(thread_id):
                result = run(engine.decide_and_commit(call), call.io)
            run(engine.after(call, result), call.io)
        except StorageError as error:
            return engine.unpaged(error, call)
        return _forget_evicted(counter, result)

    async def astep(
        self,
        view: Sequence[BaseMessage],
        state: Any,
        thread_id: str,
        *,
        store: BaseStore | None = None,
        overhead: int = 0,
        model: Any = None,
        max_tokens: int | None = None,
    ) -> PagingResult:
        """Async `step`."""
        counter = await self.acounter_for(model)
        options = self.options(
            max_tokens=max_tokens or self.max_tokens_for(model), overhead=overhead, counter=counter
        )
        call, engine = self._call(view, state, thread_id, store, options), self.engine
        try:
            async with engine.locks.ahold(thread_id):
                result = await arun(engine.decide_and_commit(call), call.io)
            await arun(engine.after(call, result), call.io)
        except StorageError as error:
            return engine.unpaged(error, call)
        return _forget_evicted(counter, result)

    # -- recall -----------------------------------------------------------------------------
    def recall(self, thread_id: str, state: Any, **asked: Unpack[RecallArgs]) -> RecallAnswer:
        """Text of the asked pages, clusters and search passages visible on `state`'s branch (what
        each argument means: `RecallArgs`)."""
        counter = self.counter_for(state=state)
        flow = self.recalls.flow(thread_id, state, self._request(counter, asked), counter)
        return run(flow, self._io(thread_id, asked.get("store")))

    async def arecall(self, thread_id: str, state: Any, **asked: Unpack[RecallArgs]) -> RecallAnswer:
        """Async `recall`."""
        counter = await self.acounter_for(state=state)
        flow = self.recalls.flow(thread_id, state, self._request(counter, asked), counter)
        return await arun(flow, self._io(thread_id, asked.get("store")))

    def _request(self, counter: TokenCounter, asked: RecallArgs) -> RecallRequest:
        history, context, query = asked.get("history", ()), asked.get("context", ()), asked.get("query")
        return RecallRequest(
            page_ids=asked.get("page_ids"),
            query=query,
            part=asked.get("part"),
            share=asked.get("share", 1),
            call_tokens=asked.get("call_tokens", 0),
            edits={m.id: m for m in history if m.id} if self.config.mode == "view" else {},
            resident=resident_turns(context, counter) if query is not None and context else [],
            served=dict(asked.get("served") or {}),
        )

    def room_for(
        self, branch: PagingState | dict[str, Any] | None, share: int = 1, call_tokens: int = 0
    ) -> int:
        """Tokens a recall result may take on this branch (see `RecallService.room_for`)."""
        branch = branch if isinstance(branch, PagingState) else PagingState.from_value(branch)
        return self.recalls.room_for(
            branch, self.counter_for(state=branch), share=share, call_tokens=call_tokens
        )


def _forget_evicted(counter: TokenCounter, result: PagingResult) -> PagingResult:
    """Keep token counts of what is resident only: a bookmark took the first message's id."""
    counter.forget(k for ids in result.evicted_ids.values() for k in ids[1:])
    return result
