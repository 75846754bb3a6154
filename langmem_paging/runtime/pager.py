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
from dataclasses import dataclass
from typing import Any, TypedDict, Unpack

from langchain_core.messages import BaseMessage
from langgraph.store.base import BaseStore

from langmem_paging.config import PagingConfig, resolve_max_tokens
from langmem_paging.core.effects import Request, arun, ask, run
from langmem_paging.core.errors import PagingWarning, StorageError
from langmem_paging.core.state import PagingState
from langmem_paging.core.tokens import TokenCounter, encoding_for_model, loaded_counter, shared_counter
from langmem_paging.index.base import SearchIndex
from langmem_paging.index.defaults import default_index
from langmem_paging.recall.plan import RecallPlan, plan_recall
from langmem_paging.recall.request import RecallArgs
from langmem_paging.recall.service import RecallAnswer, RecallRequest, RecallService, resident_turns
from langmem_paging.runtime.engine import OnStoreError, StepCall, StepEngine
from langmem_paging.runtime.thread_io import PagingIO, ThreadFlow, ThreadIO
from langmem_paging.step import PagingResult, StepOptions, step_options
from langmem_paging.step.result import PagingValue
from langmem_paging.storage.page_store import PageStore

__all__ = ["Pager", "RecallAnswer", "RecallPlan", "StepArgs", "plan_recall"]


class StepArgs(TypedDict, total=False):
    """A step's resources as `Pager.step` takes them (keywords; each optional)."""

    store: BaseStore | None
    """The graph's store of this call (unless the pager has its own)."""
    overhead: int
    """Tokens of the system prompt and tool schemas (0)."""
    model: Any
    """The model called (its encoding, and a fractional budget's window)."""
    max_tokens: int | None
    """This call's budget, when the caller corrected the configured one."""
    counter: TokenCounter
    """The tokenizer of this call, when the caller has it already (else `counter_for` the model)."""


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

    def encoding_for(self, model: Any = None, state: PagingValue = None) -> str:
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

    def counter_for(self, model: Any = None, state: PagingValue = None) -> TokenCounter:
        """The tokenizer of a call (see `encoding_for`)."""
        return shared_counter(self.encoding_for(model, state))

    async def acounter_for(self, model: Any = None, state: PagingValue = None) -> TokenCounter:
        """`counter_for`, loading an encoding not loaded yet in a worker thread (loading reads files)."""
        name = self.encoding_for(model, state)
        loaded = loaded_counter(name)
        return loaded if loaded is not None else await asyncio.to_thread(shared_counter, name)

    def max_tokens_for(self, model: Any = None) -> int:
        """`max_tokens` as an int (a fraction of the model's window is resolved here)."""
        return resolve_max_tokens(self.config.max_tokens, self.config.model if model is None else model)

    def _io(self, thread_id: str, store: BaseStore | None) -> ThreadIO:
        page_store = self.page_store_for(store)
        return ThreadIO(page_store, self.index_for(page_store), thread_id)

    # -- paging -------------------------------------------------------------------------------
    def step(
        self, view: Sequence[BaseMessage], state: PagingValue, thread_id: str, **call: Unpack[StepArgs]
    ) -> PagingResult:
        """Page `view` on `state`'s branch (this call's resources: `StepArgs`); new records are stored
        before the result returns. Under the thread's lock the step and its commit, then indexing,
        warnings, tracing and hooks; only failures of the page store and the index fall under
        `on_store_error`."""
        counter = call.get("counter") or self.counter_for(call.get("model"))
        io = self._io(thread_id, call.get("store"))
        flow = self._stepped(StepCall(thread_id, view, state, self._options(counter, call), io), counter)
        return run(flow, io)

    async def astep(
        self, view: Sequence[BaseMessage], state: PagingValue, thread_id: str, **call: Unpack[StepArgs]
    ) -> PagingResult:
        """Async `step`."""
        counter = call.get("counter") or await self.acounter_for(call.get("model"))
        io = self._io(thread_id, call.get("store"))
        flow = self._stepped(StepCall(thread_id, view, state, self._options(counter, call), io), counter)
        return await arun(flow, io)

    def _options(self, counter: TokenCounter, call: StepArgs) -> StepOptions:
        """The step's options for this call's budget, of which its `overhead` is taken (the integrations
        page right before a model call)."""
        budget = call.get("max_tokens") or self.max_tokens_for(call.get("model"))
        overhead = call.get("overhead", 0)
        components = self.engine.components
        return step_options(
            self.config, components, max_tokens=budget, overhead=overhead, counter=counter, before_model=True
        )

    def _stepped(self, call: StepCall, counter: TokenCounter) -> ThreadFlow[PagingResult]:
        """One flow for `step` and `astep`: the step and its commit under the thread's lock (`_Locked`),
        then what follows it; a store failure answers unpaged when `on_store_error` says so."""
        try:
            result = yield from ask(_Locked(self.engine, call))
            yield from self.engine.after(call, result)
        except StorageError as error:
            return self.engine.unpaged(error, call)
        # token counts of what is resident only: a bookmark took the first message's id
        counter.forget(k for ids in result.evicted_ids.values() for k in ids[1:])
        return result

    # -- recall -----------------------------------------------------------------------------
    def recall(self, thread_id: str, state: PagingValue, **asked: Unpack[RecallArgs]) -> RecallAnswer:
        """Text of the asked pages, clusters and search passages visible on `state`'s branch (what
        each argument means: `RecallArgs`)."""
        counter = self.counter_for(state=state)
        flow = self.recalls.flow(thread_id, state, self._request(counter, asked), counter)
        return run(flow, self._io(thread_id, asked.get("store")))

    async def arecall(self, thread_id: str, state: PagingValue, **asked: Unpack[RecallArgs]) -> RecallAnswer:
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


@dataclass(frozen=True)
class _Locked(Request[PagingResult, PagingIO]):
    """The step and its commit under the thread's lock, held as the driver is (sync or async)."""

    engine: StepEngine
    call: StepCall

    def answer(self, io: PagingIO) -> PagingResult:
        with self.engine.locks.hold(self.call.thread_id):
            return run(self.engine.decide_and_commit(self.call), io)

    async def aanswer(self, io: PagingIO) -> PagingResult:
        async with self.engine.locks.ahold(self.call.thread_id):
            return await arun(self.engine.decide_and_commit(self.call), io)
