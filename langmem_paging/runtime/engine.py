"""The step engine: a paging step with its I/O, for the middleware, the node and the test driver.

A step is two flows: under the thread's lock, the pure step (`langmem_paging.step`) and the
commit of what it made (reserve -> decide -> commit: the commit claims the numbers with the records,
and a step whose number another writer claimed meanwhile runs again, so two runs at once on a thread
never write one number twice; an index on the store's connection gets the passages in that commit's
transaction); then, outside the lock, indexing the new pages in any other index, warnings, tracing and hooks.
`Pager.step` and `Pager.astep` differ only in the lock and the driver. Only failures of the page store and
the index fall under `on_store_error`; anything else propagates with its own type.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import warnings
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Literal

from langchain_core.messages import BaseMessage

from langmem_paging.config import PagingConfig
from langmem_paging.core.effects import ask
from langmem_paging.core.errors import (
    LifecycleChanged,
    PageStoreError,
    PagingWarning,
    SearchIndexError,
    StorageError,
)
from langmem_paging.core.hooks import PageEvent, PagingHooks
from langmem_paging.core.state import PagingState
from langmem_paging.core.tokens import encoding_for_model, warm_up
from langmem_paging.recall.io import HookName, Notify
from langmem_paging.runtime.lifecycle_step import follow_lifecycle, with_replaced
from langmem_paging.runtime.thread_io import Commit, IndexPages, ReadLifecycle, ThreadFlow, ThreadIO, Trace
from langmem_paging.step import Components, PagingResult, StepOptions, paging_step
from langmem_paging.step.result import PagingValue

__all__ = ["OnStoreError", "StepCall", "StepEngine"]

logger = logging.getLogger("langmem_paging")

OnStoreError = Literal["raise", "continue"]
COMMIT_TRIES = 8
"""Steps tried in one call when other writers keep claiming the numbers a step reserved, or a forget
lands while a step runs (`LifecycleChanged`)."""


class _Locks:
    """One lock per thread id, sync and async, forgotten when unused."""

    def __init__(self) -> None:
        self._sync: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()
        self._async: weakref.WeakValueDictionary[tuple[str, int], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._guard = threading.Lock()

    @contextmanager
    def hold(self, thread_id: str) -> Iterator[None]:
        with self._guard:
            lock = self._sync.get(thread_id)
            if lock is None:
                lock = self._sync[thread_id] = threading.Lock()
        with lock:
            yield

    @asynccontextmanager
    async def ahold(self, thread_id: str) -> AsyncIterator[None]:
        key = (thread_id, id(asyncio.get_running_loop()))
        with self._guard:
            lock = self._async.get(key)
            if lock is None:
                lock = self._async[key] = asyncio.Lock()
        async with lock:
            yield


@dataclass(frozen=True)
class StepCall:
    """What one step of a thread works with, resolved once where the call comes in (`Pager.step`)."""

    thread_id: str
    view: Sequence[BaseMessage]
    """The messages the model would receive."""
    state: PagingValue
    """The branch's ``paging`` value as the graph holds it (the step parses it once, into its own copy:
    parsing it here too cost a quiet call ~8%, `tools/bench_scale.py --only quiet`)."""
    options: StepOptions
    """This call's budget, overhead, tokenizer and strategies."""
    io: ThreadIO
    """The thread's store, index and hooks."""


class StepEngine:
    """The flows of a paging step for one configuration (`Pager.step` runs them).

    Args:
        config: The paging options.
        on_store_error: ``"raise"`` (the turn fails; the next turn recovers, nothing lost) or
            ``"continue"`` (the turn goes on unpaged, with a warning).
    """

    def __init__(self, config: PagingConfig, *, on_store_error: OnStoreError = "raise") -> None:
        if on_store_error not in ("raise", "continue"):
            raise ValueError("`on_store_error` must be 'raise' or 'continue'.")
        self.config = config
        self.on_store_error = on_store_error
        self.components = Components.resolve(config)
        digester = getattr(self.components.tiers, "digester", None)
        self.hooks: list[PagingHooks] = [
            self.components.policy,
            *config.hooks,
            *([digester] if isinstance(digester, PagingHooks) else []),
        ]
        self.locks = _Locks()
        """One lock per thread: a thread's steps in this process one at a time."""
        warm_up(config.encoding or encoding_for_model(config.model))
        self._page_sizes: list[int] = []
        self._warned_page_size = False

    # -- the flows of a step (`Pager.step` runs them: under the thread's lock, then after it) ---------
    @staticmethod
    def decide_and_commit(call: StepCall) -> ThreadFlow[PagingResult]:
        """The step and its commit, stepped again while the commit is refused."""
        for _ in range(COMMIT_TRIES):
            try:
                result = yield from StepEngine._attempt(call)
            except LifecycleChanged:  # a forget landed while it ran: step again, from the records
                continue
            if result is not None:
                return result
            # another writer (a worker stepping another branch of the thread) claimed one of the numbers
            # since the step reserved it: step again, past them
        raise PageStoreError(
            f"the step's commit was refused {COMMIT_TRIES} times in a row (other writers took its page "
            "numbers, or forgets kept landing); the next turn steps again (nothing was written)"
        )

    @staticmethod
    def _attempt(call: StepCall) -> ThreadFlow[PagingResult | None]:
        """One step and its commit; None when the commit was refused for a number another writer took."""
        options = call.options
        lifecycle = yield from ask(ReadLifecycle())  # a forget since this state was built: follow it
        view, state, replaced = yield from follow_lifecycle(call.view, call.state, lifecycle)
        result = yield from paging_step(view, state, options)
        result.state.lifecycle = lifecycle.generation if lifecycle is not None else None
        result.updates = with_replaced(result.updates, replaced)
        touched, result.state.touched = result.state.touched, []
        keep_terms = options.tiers is not None
        if (yield from ask(Commit(result.pages, result.nodes, result.state, touched, keep_terms))):
            return result
        return None

    def after(self, call: StepCall, result: PagingResult) -> ThreadFlow[None]:
        """What follows a step outside the lock: indexing its pages, warnings, tracing, hooks."""
        yield from self._after(call.thread_id, result, call.options)

    def unpaged(self, error: StorageError, call: StepCall) -> PagingResult:
        """The call's view as it is, when the store failed and `on_store_error` is ``"continue"``."""
        if self.on_store_error == "raise":
            raise error
        warn(f"langmem-paging: {error}; this turn is not paged. Nothing was lost; the next turn pages again.")
        return PagingResult(view=list(call.view), state=PagingState.from_value(call.state))

    def _after(self, thread_id: str, result: PagingResult, options: StepOptions) -> ThreadFlow[None]:
        if result.pages:
            try:
                yield from ask(IndexPages(result.pages))
            except SearchIndexError as error:
                self._index_failed(error, thread_id)
            self._watch_page_sizes(result)
        self._report(thread_id, result, options)
        if result.changed or result.over_budget:  # a quiet call has nothing to report: no callback set-up
            yield from ask(Trace(_trace_data(thread_id, result)))
        events = _events(thread_id, result)
        if events:
            yield from ask(Notify(self.hooks, events))

    # -- failures and warnings ---------------------------------------------------------------
    def _index_failed(self, error: SearchIndexError, thread_id: str) -> None:
        """The index failing is a store failure, except that with ``"continue"`` the turn keeps its
        paged result: the pages are stored already, and the next step or search of the thread finds the gap
        (`SearchIndex.indexed_through`) and indexes them."""
        if self.on_store_error == "raise":
            raise error
        warn(
            f"langmem-paging: {error}; the new pages of thread {thread_id!r} are stored but not searchable "
            "until the next step or search of the thread indexes them."
        )

    def _report(self, thread_id: str, result: PagingResult, options: StepOptions) -> None:
        if result.changed:
            logger.info(
                "thread %s: %d -> %d tokens (budget %d); formed %s, evicted %s, folded %s",
                thread_id,
                result.tokens_before,
                result.tokens,
                result.state.budget,
                result.formed or "-",
                result.evicted or "-",
                result.folded or "-",
            )
        if result.first_over_budget:
            overhead = options.overhead
            beside = (
                f"max_tokens={options.max_tokens} minus {overhead} for the system prompt and tool schemas, "
                if overhead
                else ""
            )
            warn(
                f"langmem-paging: thread {thread_id!r} needs {result.tokens} tokens for its messages but their "
                f"budget is {options.budget} ({beside}sent with every call): {_protected_text(result, options)}. "
                "Raise `max_tokens`, shorten the protected messages"
                + (", trim the tools or the system prompt" if overhead > options.budget else "")
                + ", or lower `bookmark_share`."
            )

    def _watch_page_sizes(self, result: PagingResult) -> None:
        """Warn once when pages are usually larger than what one recall returns."""
        self._page_sizes = [*self._page_sizes, *(p.token_count for p in result.pages if p.kind == "page")][
            -50:
        ]
        if (
            self._warned_page_size
            or len(self._page_sizes) < 3
            or "boundary" not in self.config.model_fields_set
        ):
            return  # (the default boundary is for budgets of a few thousand tokens: no warning for it)
        cap = self.config.recall_cap_for(result.state.budget)
        median = sorted(self._page_sizes)[len(self._page_sizes) // 2]
        if median > cap:
            self._warned_page_size = True
            warn(
                f"langmem-paging: pages ({self.components.boundary.name}) are usually larger than one recall "
                f"returns (median {median} tokens, recall cap {cap}): a recalled page comes back in parts. Use "
                "smaller pages (e.g. fixed_10 or tokens_N) or raise `recall_max_tokens`."
            )


_LIBRARY_PARTS = (
    "/langgraph/",
    "/langchain_core/",
    "/langchain/",
    "/langsmith/",
    "/pydantic/",
    "/asyncio/",
    "/concurrent/",
    "/threading.py",
    "/contextlib.py",
    "/runpy.py",
)
"""Frames `warn` looks past: the graph machinery between the user's call and the library."""


def warn(message: str) -> None:
    """One `PagingWarning` (no log line beside it), attributed to the first frame outside this
    library, LangChain, LangGraph, LangSmith and asyncio: the user's code that ran the graph (the
    line Python's warning filters and "once" registry key on)."""
    frame: FrameType | None = sys._getframe(1)
    level = 2  # stacklevel 2: warn's caller
    while frame is not None and _is_library(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, PagingWarning, stacklevel=level if frame is not None else 2)


def _is_library(filename: str) -> bool:
    return filename.startswith((_PACKAGE, "<frozen")) or any(part in filename for part in _LIBRARY_PARTS)


_PACKAGE = str(Path(__file__).parents[1])  # the langmem_paging package


def _protected_text(result: PagingResult, options: StepOptions, shown: int = 6) -> str:
    """What nothing may evict, named: the largest protected units with why, then the bookmarks."""
    units = sorted(result.protected, key=lambda p: -p.tokens)
    named = [
        f"{p.ids[0]}{f' (+{len(p.ids) - 1} results)' if len(p.ids) > 1 else ''}: {p.tokens} tokens, {p.why}"
        for p in units[:shown]
    ]
    if len(units) > shown:
        named.append(f"{len(units) - shown} more, {sum(p.tokens for p in units[shown:])} tokens")
    bookmarks = result.protected_tokens - sum(p.tokens for p in units)
    if bookmarks > 0:
        named.append(f"bookmarks: {bookmarks} tokens")
    text = f"what nothing may evict takes {result.protected_tokens} tokens"
    if result.protected_tokens > options.budget:
        return f"{text}, more than the budget ({'; '.join(named)})"
    rest = result.tokens - result.protected_tokens
    return f"{text} ({'; '.join(named)}); the other {rest} are pages no bookmark would make smaller"


def _trace_data(thread_id: str, result: PagingResult) -> dict[str, Any]:
    return {
        "thread_id": thread_id,
        "tokens_before": result.tokens_before,
        "tokens": result.tokens,
        "budget": result.state.budget,
        "formed": result.formed,
        "evicted": result.evicted,
        "folded": result.folded,
        "over_budget": result.over_budget,
    }


def _events(thread_id: str, result: PagingResult) -> list[tuple[HookName, PageEvent]]:
    turn = result.state.turn
    events: list[tuple[HookName, PageEvent]] = []
    if result.formed:
        formed = [p for p in result.pages if p.id in result.formed]
        events.append(("formed", PageEvent(thread_id, list(result.formed), turn, formed)))
    if result.evicted:
        events.append(("evicted", PageEvent(thread_id, list(result.evicted), turn)))
    return events
