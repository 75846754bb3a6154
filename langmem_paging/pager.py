"""Pager: a paging step or a recall with its I/O, shared by the middleware, the node and the tool.

Sync and async differ only at the store, bookmarker and policy calls; everything else
is the pure `paging_step` and the pure recall planning below. Steps of one thread are
serialized in the process (a per-thread lock around reserve -> decide -> commit), so
two runs submitted at once on a thread never take the same page number.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import warnings
import weakref
from collections.abc import Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from langmem_paging.bookmarks import BOOKMARK_PATTERN
from langmem_paging.clusters import ClusterOptions
from langmem_paging.config import PagingConfig, resolve_max_tokens
from langmem_paging.effects import LoadPages, Reserve, arun, run
from langmem_paging.hooks import PageEvent, PagingHooks
from langmem_paging.paging import PagingResult, StepOptions, paging_step
from langmem_paging.passages import build_passages, pack_passages
from langmem_paging.recall_text import (
    clip_note,
    page_parts,
    recall_artifact,
    render_page,
    render_passages,
    render_recall_shown,
)
from langmem_paging.records import Page, cluster_number, page_number
from langmem_paging.search import Hit, InMemoryBM25Index, SearchIndex, best_pages
from langmem_paging.state import PagingState
from langmem_paging.store import PageStore
from langmem_paging.tiers import get_tiers
from langmem_paging.tokens import TokenCounter, encoding_for_model

__all__ = ["Pager", "RecallAnswer", "RecallPlan", "plan_recall"]

logger = logging.getLogger("langmem_paging")

_ID = re.compile(r"^[pc][1-9]\d*$")
_CLUSTER_MEMBERS_LISTED = 40
RECALL_UNAVAILABLE = (
    "recall failed: the paged-out history is unavailable right now (the page store did not answer). "
    "Try the same recall again in a moment; nothing was lost."
)


@dataclass
class RecallPlan:
    """A recall request after normalizing what the model sent."""

    page_ids: list[str] = field(default_factory=list)
    """Well-formed page ids (``p3``), deduplicated, in the order asked."""
    cluster_ids: list[str] = field(default_factory=list)
    """Well-formed cluster ids (``c2``)."""
    malformed: list[str] = field(default_factory=list)
    """What the model sent that is not an id."""
    query: str | None = None
    """Search text, when given."""
    part: int | None = None
    """Which part of an oversized page (1-based)."""


def plan_recall(page_ids: Any, query: Any, part: Any = None) -> RecallPlan:
    """Accept ``["p3"]``, ``"p3, c2"``, ``[3]``, or pasted bookmarks ``"[p3:kw,...]"``; never raise."""
    if page_ids is None:
        raw: list = []
    elif isinstance(page_ids, (list, tuple)):
        raw = list(page_ids)
    else:
        raw = [page_ids]
    raw = [f"p{item}" if isinstance(item, int) and not isinstance(item, bool) else item for item in raw]
    plan = RecallPlan(query=query.strip() if isinstance(query, str) and query.strip() else None)
    if isinstance(part, int) and not isinstance(part, bool) and part >= 1:
        plan.part = part
    for item in raw:
        if not isinstance(item, str):
            plan.malformed.append(repr(item)[:40])
            continue
        marks = [m.group(1) for m in BOOKMARK_PATTERN.finditer(item)]
        marks += re.findall(r"\[(c[1-9]\d*):", item)
        pieces = marks or [p for p in re.split(r"[\s,;]+", item) if p]
        for piece in pieces:
            piece = piece.strip().strip("'\"[]").lower()
            piece = f"p{piece}" if piece.isdigit() else piece
            if not _ID.match(piece):
                plan.malformed.append(repr(piece)[:40])
            elif piece.startswith("p") and piece not in plan.page_ids:
                plan.page_ids.append(piece)
            elif piece.startswith("c") and piece not in plan.cluster_ids:
                plan.cluster_ids.append(piece)
    return plan


@dataclass
class RecallAnswer:
    """What `Pager.recall` returns to the tool."""

    content: str
    """The tool message text."""
    artifact: dict[str, Any]
    """Kept on the ToolMessage (not sent to the model) to shrink and re-expand it."""
    accessed: list[str]
    """Page ids to count one access each."""
    turn: int
    """The thread's user turn."""
    status: str = "success"
    """The tool message status: ``"error"`` when the page store could not be read."""


class _Locks:
    """One lock per thread id, sync and async, forgotten when unused."""

    def __init__(self) -> None:
        self._sync: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._async: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._guard = threading.Lock()

    @contextmanager
    def hold(self, thread_id: str):
        with self._guard:
            lock = self._sync.get(thread_id)
            if lock is None:
                lock = self._sync[thread_id] = threading.Lock()
        with lock:
            yield

    @asynccontextmanager
    async def ahold(self, thread_id: str):
        key = (thread_id, id(asyncio.get_running_loop()))
        with self._guard:
            lock = self._async.get(key)
            if lock is None:
                lock = self._async[key] = asyncio.Lock()
        async with lock:
            yield


class _StoreHandlers:
    def __init__(self, page_store: PageStore, thread_id: str) -> None:
        self.page_store, self.thread_id = page_store, thread_id

    def reserve(self, request: Reserve) -> list[int]:
        return self.page_store.reserve(self.thread_id, request.kind, request.digests, request.state)

    async def areserve(self, request: Reserve) -> list[int]:
        return await self.page_store.areserve(self.thread_id, request.kind, request.digests, request.state)

    def load_pages(self, request: LoadPages) -> dict:
        return self.page_store.get_many(self.thread_id, request.page_ids)

    async def aload_pages(self, request: LoadPages) -> dict:
        return await self.page_store.aget_many(self.thread_id, request.page_ids)


class Pager:
    """Runs paging steps and recalls for one configuration over one `PageStore`.

    Args:
        config: The paging options.
        page_store: Where pages live.
        index: Passage search (default: an in-process BM25 index of this pager's own).
        on_store_error: ``"raise"`` (the turn fails; the next turn recovers, nothing lost) or
            ``"continue"`` (the turn goes on unpaged, with a warning).
    """

    def __init__(
        self,
        config: PagingConfig,
        page_store: PageStore,
        *,
        index: SearchIndex | None = None,
        on_store_error: str = "raise",
    ) -> None:
        if on_store_error not in ("raise", "continue"):
            raise ValueError("`on_store_error` must be 'raise' or 'continue'.")
        self.config = config
        self.page_store = page_store
        if index is None and config.search_embedder is not None:
            from langmem_paging.embeddings import get_embedder

            index = InMemoryBM25Index(embedder=get_embedder(config.search_embedder))
        # an index of its own: an index is keyed by thread id, and another pager's store may
        # hold another thread under the same id
        self.index = index or InMemoryBM25Index()
        self.on_store_error = on_store_error
        self.policy = config.resolved_policy()
        self.boundary = config.resolved_boundary()
        self.bookmarker = config.resolved_bookmarker()
        tiers = get_tiers(config.tiers)
        digester = getattr(tiers, "digester", None)
        self.hooks: list[PagingHooks] = [self.policy, *config.hooks,
                                         *([digester] if isinstance(digester, PagingHooks) else [])]
        self._page_sizes: list[int] = []
        self._warned_page_size = False
        self._counters: dict[str, TokenCounter] = {}
        self._locks = _Locks()
        self.default_encoding = config.encoding or encoding_for_model(config.model) if (
            config.encoding or config.model) else None
        # load the likely encodings now: loading reads files, which an event loop must not wait on
        for name in {self.default_encoding or "cl100k_base", "cl100k_base"}:
            self._counters[name] = TokenCounter(encoding=name)

    # -- configuration resolved per call ------------------------------------------------
    def counter_for(self, model: Any = None) -> TokenCounter:
        """The tokenizer: `encoding`, else `model` from the config, else the model called."""
        name = self.config.encoding or encoding_for_model(self.config.model or model)
        if self.default_encoding is None and model is not None:
            self.default_encoding = name
        name = self.default_encoding or name
        if name not in self._counters:
            self._counters[name] = TokenCounter(encoding=name)
        return self._counters[name]

    async def acounter_for(self, model: Any = None) -> TokenCounter:
        """`counter_for`, loading a new encoding in a worker thread."""
        name = self.config.encoding or encoding_for_model(self.config.model or model)
        if (self.default_encoding or name) not in self._counters:
            await asyncio.to_thread(self.counter_for, model)
        return self.counter_for(model)

    def max_tokens_for(self, model: Any = None) -> int:
        """`max_tokens` as an int (a fraction of the model's window is resolved here)."""
        return resolve_max_tokens(self.config.max_tokens, self.config.model if model is None else model)

    def options(self, *, max_tokens: int, overhead: int, counter: TokenCounter) -> StepOptions:
        """The step's options for a budget of `max_tokens` of which `overhead` is taken."""
        budget = max(1, max_tokens - overhead)
        share_tokens = max(1, int(max_tokens * self.config.bookmark_share))
        count_message = (counter.count_message if self.config.token_counter is None
                         else (lambda m, f=self.config.token_counter: f([m])))
        large = self.config.large_result_share
        return StepOptions(
            budget=budget,
            low_water=self.config.low_water_for(budget),
            boundary=self.boundary,
            policy=self.policy,
            bookmarker=self.bookmarker,
            clusters=ClusterOptions.for_share(share_tokens, threshold=self.config.cluster_threshold,
                                              max_clusters=self.config.max_clusters),
            count_message=count_message,
            count_text=counter.count_text,
            large_result_tokens=None if large is None else max(1, int(max_tokens * large)),
            recent_messages=self.config.recent_messages,
            tiers=get_tiers(self.config.tiers),
        )

    # -- paging ----------------------------------------------------------------------------
    def step(self, view: Sequence[BaseMessage], state: Any, thread_id: str, *, overhead: int = 0,
             model: Any = None) -> PagingResult:
        """Page `view` on `state`'s branch; new records are stored before the result returns."""
        counter = self.counter_for(model)
        options = self.options(max_tokens=self.max_tokens_for(model), overhead=overhead, counter=counter)
        try:
            with self._locks.hold(thread_id):
                result = run(paging_step(view, state, options), _StoreHandlers(self.page_store, thread_id))
                touched, result.state.touched = result.state.touched, []
                self.page_store.commit(thread_id, pages=result.pages, nodes=result.nodes, state=result.state,
                                       stats=touched)
        except Exception as error:
            return self._store_failed(error, view, state)
        self._after(thread_id, result)
        self._trace(thread_id, result)
        for hook in self.hooks:
            self._call_hooks(hook, thread_id, result)
        return result

    async def astep(self, view: Sequence[BaseMessage], state: Any, thread_id: str, *, overhead: int = 0,
                    model: Any = None) -> PagingResult:
        """Async `step`."""
        counter = await self.acounter_for(model)
        options = self.options(max_tokens=self.max_tokens_for(model), overhead=overhead, counter=counter)
        try:
            async with self._locks.ahold(thread_id):
                result = await arun(paging_step(view, state, options), _StoreHandlers(self.page_store, thread_id))
                touched, result.state.touched = result.state.touched, []
                await self.page_store.acommit(thread_id, pages=result.pages, nodes=result.nodes,
                                              state=result.state, stats=touched)
        except Exception as error:
            return self._store_failed(error, view, state)
        self._after(thread_id, result)
        await self._atrace(thread_id, result)
        for hook in self.hooks:
            await self._acall_hooks(hook, thread_id, result)
        return result

    def _store_failed(self, error: Exception, view, state) -> PagingResult:
        if self.on_store_error == "raise" or not _is_store_error(error):
            raise error
        warnings.warn(
            f"langmem-paging: the page store failed ({type(error).__name__}: {error}); this turn is not "
            "paged. Nothing was lost; the next turn pages again.",
            RuntimeWarning,
            stacklevel=4,
        )
        unchanged = PagingState.from_value(state)
        return PagingResult(view=list(view), state=unchanged)

    def _after(self, thread_id: str, result: PagingResult) -> None:
        for counter in self._counters.values():  # keep token counts of what is resident only
            counter.forget(k for ids in result.evicted_ids.values() for k in ids[1:])
        if result.pages:
            self._index_pages(thread_id, result.pages)
            self._watch_page_sizes(result)
        if result.changed:
            logger.info(
                "thread %s: %d -> %d tokens (budget %d); formed %s, evicted %s, folded %s",
                thread_id, result.tokens_before, result.tokens, result.state.budget,
                result.formed or "-", result.evicted or "-", result.folded or "-",
            )
        if result.first_over_budget:
            message = (
                f"langmem-paging: thread {thread_id!r} needs {result.tokens} tokens but the budget is "
                f"{result.state.budget}: what nothing may evict (system prompt and tools, pinned messages, "
                f"the newest user message, the latest tool group, bookmarks) takes {result.protected_tokens}. "
                "Raise `max_tokens`, shorten the protected messages, or lower `bookmark_share`."
            )
            logger.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=4)

    def _index_pages(self, thread_id: str, pages: list[Page]) -> None:
        """Index the step's new pages for search. The index failing is a store failure (`on_store_error`),
        except that with ``"continue"`` the turn keeps its paged result: the pages are stored already,
        and a later `load` of the thread re-indexes them."""
        try:
            self.index.add(thread_id, pages)
        except Exception as error:
            if self.on_store_error == "raise" or not _is_store_error(error):
                raise
            message = (f"langmem-paging: the search index failed ({type(error).__name__}: {error}); the new "
                       f"pages of thread {thread_id!r} are stored but not searchable until the index is loaded "
                       "again.")
            logger.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=5)

    def _watch_page_sizes(self, result: PagingResult) -> None:
        """Warn once when pages are usually larger than what one recall returns."""
        self._page_sizes = ([*self._page_sizes, *(p.token_count for p in result.pages if p.kind == "page")])[-50:]
        if self._warned_page_size or len(self._page_sizes) < 3:
            return
        cap = self.config.recall_cap_for(result.state.budget)
        median = sorted(self._page_sizes)[len(self._page_sizes) // 2]
        if median > cap:
            self._warned_page_size = True
            message = (
                f"langmem-paging: pages ({self.boundary.name}) are usually larger than one recall returns "
                f"(median {median} tokens, recall cap {cap}): a recalled page comes back in parts. Use smaller "
                "pages (e.g. fixed_10 or tokens_N) or raise `recall_max_tokens`."
            )
            logger.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=5)

    @staticmethod
    def _trace_data(thread_id: str, result: PagingResult) -> dict[str, Any]:
        return {"thread_id": thread_id, "tokens_before": result.tokens_before, "tokens": result.tokens,
                "budget": result.state.budget, "formed": result.formed, "evicted": result.evicted,
                "folded": result.folded, "over_budget": result.over_budget}

    def _trace(self, thread_id: str, result: PagingResult) -> None:
        """Paging metadata on the run, for tracing (a custom event ``langmem_paging``)."""
        from langchain_core.callbacks import dispatch_custom_event

        try:
            dispatch_custom_event("langmem_paging", self._trace_data(thread_id, result))
        except RuntimeError:  # not inside a run: nothing to attach it to
            pass

    async def _atrace(self, thread_id: str, result: PagingResult) -> None:
        from langchain_core.callbacks import adispatch_custom_event

        try:
            await adispatch_custom_event("langmem_paging", self._trace_data(thread_id, result))
        except RuntimeError:
            pass

    def _events(self, thread_id: str, result: PagingResult):
        turn = result.state.turn
        if result.formed:
            yield "formed", PageEvent(thread_id, list(result.formed), turn, [p for p in result.pages
                                                                             if p.id in result.formed])
        if result.evicted:
            yield "evicted", PageEvent(thread_id, list(result.evicted), turn)

    def _call_hooks(self, hook: PagingHooks, thread_id: str, result: PagingResult) -> None:
        for name, event in self._events(thread_id, result):
            try:
                getattr(hook, f"on_{name}")(event)
            except Exception:  # noqa: BLE001 - a hook never fails the turn
                logger.exception("paging hook %r failed on %s", hook, name)

    async def _acall_hooks(self, hook: PagingHooks, thread_id: str, result: PagingResult) -> None:
        for name, event in self._events(thread_id, result):
            try:
                await getattr(hook, f"aon_{name}")(event)
            except Exception:  # noqa: BLE001
                logger.exception("paging hook %r failed on %s", hook, name)

    # -- recall -----------------------------------------------------------------------------
    def recall(self, thread_id: str, state: Any, *, page_ids: Any = None, query: Any = None,
               part: Any = None, share: int = 1, call_tokens: int = 0) -> RecallAnswer:
        """Text of the asked pages, clusters and search passages visible on `state`'s branch.

        `share`: how many recalls the model made at once (each gets that share of the room);
        `call_tokens`: tokens of the message that made the call (the next step protects it)."""
        branch = PagingState.from_value(state)
        plan = plan_recall(page_ids, query, part)
        wanted, clusters, notes = self._resolve(plan, branch)
        try:
            hits, nodes, members, pages = self._read(thread_id, plan, branch, wanted, clusters)
        except Exception as error:
            return self._recall_unavailable(error, thread_id, branch)
        answer = self._answer(plan, branch, wanted, hits, nodes, members, pages, notes, share, call_tokens)
        self._notify_recalled(thread_id, answer)
        return answer

    def _read(self, thread_id: str, plan: RecallPlan, branch: PagingState, wanted: list[str],
              clusters: list[str]) -> tuple[list[Hit], dict, dict, dict[str, Page]]:
        """What a recall reads from the index and the store: search hits, clusters, their members, pages."""
        hits = []
        if plan.query is not None:
            if not self.index.has(thread_id):
                self.index.load(thread_id, self.page_store.scan(thread_id))
            hits = self._hits(thread_id, plan.query, branch)
        nodes = self.page_store.get_clusters(thread_id, clusters)
        members = {cid: self.page_store.members(thread_id, cid, limit=_CLUSTER_MEMBERS_LISTED) for cid in nodes}
        pages = self.page_store.get_many(thread_id, [*wanted, *best_pages(hits, 24), *(p for m in members.values()
                                                                                 for p in m)])
        return hits, nodes, members, pages

    async def arecall(self, thread_id: str, state: Any, *, page_ids: Any = None, query: Any = None,
                      part: Any = None, share: int = 1, call_tokens: int = 0) -> RecallAnswer:
        """Async `recall`."""
        branch = PagingState.from_value(state)
        plan = plan_recall(page_ids, query, part)
        wanted, clusters, notes = self._resolve(plan, branch)
        try:
            hits, nodes, members, pages = await self._aread(thread_id, plan, branch, wanted, clusters)
        except Exception as error:
            return self._recall_unavailable(error, thread_id, branch)
        answer = self._answer(plan, branch, wanted, hits, nodes, members, pages, notes, share, call_tokens)
        await self._anotify_recalled(thread_id, answer)
        return answer

    async def _aread(self, thread_id: str, plan: RecallPlan, branch: PagingState, wanted: list[str],
                     clusters: list[str]) -> tuple[list[Hit], dict, dict, dict[str, Page]]:
        """Async `_read`."""
        hits = []
        if plan.query is not None:
            if not self.index.has(thread_id):
                self.index.load(thread_id, await self.page_store.alist(thread_id))  # (async: read, then index)
            hits = self._hits(thread_id, plan.query, branch)
        nodes = await self.page_store.aget_clusters(thread_id, clusters)
        members = {cid: await asyncio.to_thread(self.page_store.members, thread_id, cid,
                                                limit=_CLUSTER_MEMBERS_LISTED) for cid in nodes}
        pages = await self.page_store.aget_many(thread_id, [*wanted, *best_pages(hits, 24),
                                                            *(p for m in members.values() for p in m)])
        return hits, nodes, members, pages

    @staticmethod
    def _recall_unavailable(error: Exception, thread_id: str, branch: PagingState) -> RecallAnswer:
        """A store failure while recall reads (after the store's retries): an error result telling the
        model to try again, so the call still gets its result. The caller's bugs still raise."""
        if not _is_store_error(error):
            raise error
        logger.warning("recall on thread %s: the page store failed (%s: %s); the model is told to try again",
                       thread_id, type(error).__name__, error, exc_info=error)
        return RecallAnswer(RECALL_UNAVAILABLE, {}, [], branch.turn, status="error")

    def _notify_recalled(self, thread_id: str, answer: RecallAnswer) -> None:
        if not answer.accessed:
            return
        event = PageEvent(thread_id, list(dict.fromkeys(answer.accessed)), answer.turn)
        for hook in self.hooks:
            try:
                hook.on_recalled(event)
            except Exception:  # noqa: BLE001 - a hook never fails the turn
                logger.exception("paging hook %r failed on recalled", hook)

    async def _anotify_recalled(self, thread_id: str, answer: RecallAnswer) -> None:
        if not answer.accessed:
            return
        event = PageEvent(thread_id, list(dict.fromkeys(answer.accessed)), answer.turn)
        for hook in self.hooks:
            try:
                await hook.aon_recalled(event)
            except Exception:  # noqa: BLE001
                logger.exception("paging hook %r failed on recalled", hook)

    @staticmethod
    def _visible(branch: PagingState, page_id: str) -> bool:
        return branch.owns("p", page_number(page_id)) and page_id not in branch.pages

    def _resolve(self, plan: RecallPlan, branch: PagingState) -> tuple[list[str], list[str], list[str]]:
        notes = []
        if plan.malformed:
            notes.append(f"Not page or cluster ids: {_listed(plan.malformed, 5)}. Ids look like 'p3' or 'c2'.")
        unknown = [p for p in plan.page_ids if not branch.owns("p", page_number(p))]
        unknown += [c for c in plan.cluster_ids if not branch.owns("c", cluster_number(c))]
        resident = [p for p in plan.page_ids if p in branch.pages]
        if unknown:
            notes.append(f"No such page or cluster in this conversation: {_listed(unknown)}.")
        if resident:
            notes.append(f"Already in your context, not paged out: {_listed(resident)}.")
        wanted = [p for p in plan.page_ids if p not in unknown and p not in resident]
        clusters = [c for c in plan.cluster_ids if c not in unknown]
        return wanted, clusters, notes

    def _hits(self, thread_id: str, query: str, branch: PagingState) -> list[Hit]:
        # resident pages too: the room the result takes pushes them out at the next step
        return self.index.search(thread_id, query, limit=max(50, 8 * self.config.search_results),
                                 allow=lambda pid: branch.owns("p", page_number(pid)))

    def room_for(self, branch: PagingState, share: int = 1, call_tokens: int = 0) -> int:
        """Tokens a recall result may take: all the budget leaves beside what nothing may evict
        (the next step makes that room: it pages the rest out, back to the budget rather than the
        low-water mark, and keeps the result), within `recall_max_tokens`, split between recalls
        made at once. Set aside: the calling message (`call_tokens`) and the bookmarks of the
        resident pages the next step may push out (within the bookmarks' share)."""
        budget = branch.budget or (self.config.max_tokens if isinstance(self.config.max_tokens, int) else 0)
        if not branch.budget:
            return self.config.recall_cap_for(budget)
        bookmark_text = int(getattr(self.bookmarker, "max_tokens", 24) or 24)
        framing = self.counter_for().count_message(HumanMessage("", id="langmem-paging-room"))
        bookmark_tokens = bookmark_text + framing
        new_bookmarks = min(int(budget * self.config.bookmark_share), bookmark_tokens * (len(branch.pages) + 1))
        room = budget - branch.protected - call_tokens - new_bookmarks - 16
        if self.config.recall_max_tokens is not None:
            room = min(room, self.config.recall_max_tokens)
        return max(64, room // max(1, share))

    def _answer(self, plan, branch, wanted, hits, nodes, members, pages: dict[str, Page], notes,
                share: int, call_tokens: int) -> RecallAnswer:
        counter = self.counter_for()
        cap = self.room_for(branch, share, call_tokens)
        missing = [p for p in wanted if p not in pages]
        if missing:
            notes.append(f"No such page in this conversation: {_listed(missing)}.")
        if plan.query is not None and not hits:
            notes.append(f"Nothing paged out matches the query {_clip(plan.query)!r}.")
        if not (plan.page_ids or plan.cluster_ids or plan.query or plan.malformed):
            notes.append("Pass `page_ids` (the pN or cN of a bookmark such as [p3:...]) or a `query`.")
        items: list[dict[str, Any]] = []
        found = [p for p in wanted if p in pages]
        long = [p for p in found if plan.part is not None or counter.count_text(render_page(pages[p])) > cap - 16]
        # a part leaves room for the notes, its own included ("p3 is long: part 1 of 12; ...")
        part_tokens = max(24, cap - _note_tokens(notes, cap, counter) - 28 * len(long) - 8)
        for page_id in found:
            page = pages[page_id]
            if page_id not in long:
                items.append({"page": page_id})
                continue
            n = len(page_parts(page, part_tokens, counter))
            part = min(plan.part or 1, n)
            items.append({"page": page_id, "part": part})
            follow = f"; recall(page_ids=['{page_id}'], part={part + 1}) for more" if part < n else ""
            notes.append(f"{page_id} is long: part {part} of {n}{follow}.")
        for cid, node in nodes.items():
            listed = [p for p in members[cid] if p in pages and self._visible(branch, p)]
            fits = sum(pages[p].token_count for p in listed) <= cap // 2 and len(listed) == node.size
            items.append({"cluster": cid, "members": listed, "text": fits, "more": node.size - len(listed)})
        if hits:
            used = sum(counter.count_text(render_page(pages[i["page"]])) for i in items if "page" in i
                       and "part" not in i)
            passage_items = self._passage_items(hits, pages, counter,
                                                max(0, cap - used - _note_tokens(notes, cap, counter) - 8))
            if not passage_items:
                best = ", ".join(best_pages(hits, 3))
                notes.append(f"Matches in {best}, but no passage fits the {cap} tokens left for this result: "
                             f"recall(page_ids=['{best_pages(hits, 1)[0]}'], part=1) reads the best page in parts.")
            items += passage_items
        if notes and not items:
            shown = [*branch.clusters, *branch.shown]
            notes.append(f"Bookmarks in your context: {', '.join(shown) or 'none yet (nothing paged out)'}.")
        spec = {"items": items, "max_tokens": cap, "part_tokens": part_tokens, "note": " ".join(notes),
                "encoding": counter.encoding.name}
        content, shown_labels = render_recall_shown(spec, pages.get, nodes.get, counter)
        # a recall is an access, whether or not all of the text fit
        accessed = [*found, *(label for label in shown_labels if label.startswith("p") and label not in found)]
        for item in items:
            if "cluster" in item and item["cluster"] in shown_labels and item["text"]:
                accessed += item["members"]
        accessed += [p for p in plan.page_ids if p in branch.pages]
        recalled = list(dict.fromkeys(label for label in shown_labels if label.startswith("p")))
        return RecallAnswer(content, recall_artifact(spec, recalled), accessed, branch.turn)

    def _passage_items(self, hits, pages: dict[str, Page], counter: TokenCounter, room: int) -> list[dict]:
        """The best passages around `hits` that fit in `room`, as recall items grouped by page."""
        sizes = {pid: len(page.messages) for pid, page in pages.items()}
        passages = build_passages([h for h in hits if h.page_id in pages], sizes,
                                  neighbours=self.config.passage_neighbours)[: self.config.search_results]

        def cost(passage) -> int:
            return counter.count_text(render_passages(pages[passage.page_id], [(passage.start, passage.stop)])) + 1

        return [{"passages": pid, "spans": [list(s) for s in spans]}
                for pid, spans in pack_passages(passages, cost, room)]


def _listed(ids: Sequence[str], limit: int = 20) -> str:
    """Ids for a note, the first `limit` of them and how many more (the model may send thousands)."""
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def _note_tokens(notes: list[str], cap: int, counter: TokenCounter) -> int:
    """Tokens the notes take in a result of `cap` tokens (clipped as `render_recall` clips them)."""
    return counter.count_text(clip_note(" ".join(notes), cap, counter))


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _is_store_error(error: Exception) -> bool:
    """Errors from the store layer (not the caller's bugs): connection and database errors."""
    return not isinstance(error, (ValueError, TypeError, KeyError, AttributeError, AssertionError))

