"""The paging step, pure: the context and the branch's paging state in, the paged context out.

Flow: messages -> pages (boundary) -> policy (which page goes) -> bookmark -> cold tier
(old bookmarks fold into clusters) -> the new context, the new state, and what to store.

The step works on the *view*: the messages the model would receive (in replace mode
the state's messages; in view mode the history as the last step left it shown). Its
work is proportional to the view, which the budget bounds, never to the history.

It is a generator (`paging_step`) that yields requests for ids, bookmarks and features
(`langmem_paging.effects`); `page_messages` / `apage_messages` drive it with no store,
`langmem_paging.pager.Pager` with one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage, ToolMessage

from langmem_paging.bookmarks import (
    Bookmark,
    BookmarkContext,
    Bookmarker,
    PageDraft,
    as_bookmarker,
    bookmark_message,
    cluster_message,
    tool_result_stub,
)
from langmem_paging.boundaries import BoundaryStrategy, get_boundary
from langmem_paging.clusters import (
    ClusterOptions,
    format_cluster_bookmark,
    materialize,
    merge_terms,
    plan_folds,
)
from langmem_paging.effects import (
    ComputeFeatures,
    LoadPages,
    LocalHandlers,
    MakeBookmarks,
    MakeDigests,
    Reserve,
    arun,
    run,
)
from langmem_paging.messages import (
    Unit,
    is_pinned,
    library_mark,
    message_keys,
    recall_copy_pages,
    split_units,
)
from langmem_paging.policies import Candidate, EvictionPolicy, PolicyContext, get_policy
from langmem_paging.recall_text import expand_recall_copy, shrink_recall_copy
from langmem_paging.records import ClusterNode, Page, messages_digest, page_number
from langmem_paging.state import PagingState, ResidentPage, ShownPage
from langmem_paging.text import search_terms
from langmem_paging.tiers import TierItem, TierMode, digest_message, extractive_digest, get_tiers
from langmem_paging.tokens import TokenCounter, message_text

__all__ = [
    "PagingResult",
    "StepOptions",
    "apage_messages",
    "page_messages",
    "paging_step",
    "reconstruct_history",
]

logger = logging.getLogger("langmem_paging")


@dataclass(frozen=True)
class StepOptions:
    """Everything one step needs to decide, resolved from `PagingConfig`."""

    budget: int
    """Tokens the message list may take (``max_tokens`` minus the system prompt and tools)."""
    low_water: int
    """When over budget, page down to this many tokens."""
    boundary: BoundaryStrategy
    """Where pages are cut."""
    policy: EvictionPolicy
    """Which page goes next."""
    bookmarker: Bookmarker
    """Makes bookmarks for new pages."""
    clusters: ClusterOptions
    """How old bookmarks fold into clusters."""
    count_message: Callable[[BaseMessage], int]
    """Tokens of one message."""
    count_text: Callable[[str], int]
    """Tokens of a string."""
    large_result_tokens: int | None = None
    """A tool result larger than this is paged on arrival (None: never)."""
    recent_messages: int = 6
    """Messages before the newest user message that count as recent context for policies."""
    keep_ids_without_id: bool = True
    """Messages with no id cannot be removed from state: keep them resident (replace mode)."""
    tiers: TierMode | None = None
    """Hot/warm/cold tier scoring (instead of `policy`), or None."""


@dataclass
class PagingResult:
    """What one paging step decided."""

    view: list[BaseMessage]
    """The messages the model should receive."""
    state: PagingState
    """The branch's new paging state (the input state is never mutated)."""
    updates: list[BaseMessage] = field(default_factory=list)
    """`add_messages` updates that turn the input messages into `view` (replace mode): bookmarks
    under the id of their page's first message, `RemoveMessage` for the page's other messages,
    shrunk recall results and paged tool results under their own ids."""
    pages: list[Page] = field(default_factory=list)
    """Pages formed by this step, to store before the state is used."""
    nodes: list[ClusterNode] = field(default_factory=list)
    """Cluster nodes made by this step, to store with the pages."""
    formed: list[str] = field(default_factory=list)
    """Ids of the pages formed."""
    evicted: list[str] = field(default_factory=list)
    """Ids of the pages evicted (now shown by a bookmark)."""
    folded: list[str] = field(default_factory=list)
    """Ids of the pages whose bookmarks folded into a cluster."""
    tokens_before: int = 0
    """Tokens of the view before this step."""
    tokens: int = 0
    """Tokens of `view`."""
    protected_tokens: int = 0
    """Tokens nothing can evict: system and pinned messages, the newest user message, the
    latest tool group, unanswered calls, bookmarks."""
    over_budget: bool = False
    """True when even after paging the view exceeds the budget (too much is protected)."""
    first_over_budget: bool = False
    """True the first time on this branch that `over_budget` happened (warn once)."""
    evicted_ids: dict[str, list[str]] = field(default_factory=dict, repr=False)
    """Message ids of each page evicted by this step."""

    @property
    def changed(self) -> bool:
        """True when something was formed, evicted, folded or rewritten."""
        return bool(self.updates or self.pages or self.nodes)


# -- helpers ------------------------------------------------------------------------------


def _newest_user_index(messages: Sequence[BaseMessage], keys: Sequence[str], library: set[str]) -> int | None:
    """Index of the newest user message: a human message that is not one of the state's bookmarks
    (`library`: their keys; metadata alone can be copied into a user's message)."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], HumanMessage) and keys[i] not in library:
            return i
    return None


def _tool_calls_by_id(messages: Sequence[BaseMessage]) -> dict[str, dict]:
    out = {}
    for message in messages:
        for call in getattr(message, "tool_calls", None) or []:
            if call.get("id"):
                out[call["id"]] = call
    return out


def _recent_text(messages: Sequence[BaseMessage], newest_user: int | None, recent: int) -> str:
    end = len(messages)
    start = max(0, (newest_user if newest_user is not None else end) - recent)
    return "\n".join(message_text(m) for m in messages[start:end])


@dataclass
class _Draft:
    """A page being formed in this step."""

    units: list[Unit]
    kind: str = "page"

    @property
    def messages(self) -> list[BaseMessage]:
        return [m for u in self.units for m in u.messages]


def _stored_form(message: BaseMessage) -> BaseMessage:
    """How a message is kept inside a page: a recall result as a reference to its pages."""
    if recall_copy_pages(message) and not library_mark(message).get("shrunk"):
        return shrink_recall_copy(message)
    return message


def _cut(units: list[Unit], following: Unit | None, boundary: BoundaryStrategy, count_message):
    """Cut a run of free units into closed pages and an open tail."""
    closed: list[list[Unit]] = []
    running: list[Unit] = []
    for unit in units:
        if running and boundary.starts_new_page(running, unit, count_message):
            closed.append(running)
            running = []
        running.append(unit)
    if running and following is not None and boundary.starts_new_page(running, following, count_message):
        closed.append(running)
        running = []
    return closed, running


# -- the step -----------------------------------------------------------------------------


def paging_step(
    view: Sequence[BaseMessage], state_value: Any, options: StepOptions
) -> Generator[Any, Any, PagingResult]:
    """Page `view` under `options.budget`; yields requests (see `langmem_paging.effects`).

    Neither `view` nor `state_value` is mutated.
    """
    messages = list(view)
    state = PagingState.from_value(state_value)
    keys = message_keys(messages)
    position = {k: i for i, k in enumerate(keys)}
    count = options.count_message
    counts = [count(m) for m in messages]
    total = tokens_before = sum(counts)
    replace: dict[str, BaseMessage | None] = {}
    result = PagingResult(view=messages, state=state, tokens_before=tokens_before, tokens=tokens_before)

    # 1. The turn clock, and the state reconciled with what the context really holds.
    newest_user = _newest_user_index(messages, keys, _library_keys(state))
    if newest_user is not None and keys[newest_user] != state.last_user:
        state.turn += 1
        state.last_user = keys[newest_user]
    orphans, orphan_clusters = _reconcile(state, messages, keys, position)
    _number_new_messages(state, messages, keys)
    recalled_now = {k for k in state.recalled if k in position}
    state.recalled = []

    # 2. What nothing may evict, and the free units pages are cut from.
    units = split_units(messages)
    protected = _protected_units(units, messages, keys, newest_user, state, recalled_now, options)
    calls = _tool_calls_by_id(messages)  # a result paged later than its turn still names its call

    # 3. Tool results too large for the context are paged on arrival.
    large = [(unit, i) for unit, i in _large_results(units, protected, keys, counts, state, options)
             if _stub_is_shorter(messages[i], calls.get(messages[i].tool_call_id), counts[i], count)]
    if large:
        drafts = [_Draft([Unit(i, (messages[i],))], kind="tool_result") for _, i in large]
        pages = yield from _form(drafts, state, options, keys, counts, messages, result)
        for (unit, i), page in zip(large, pages, strict=True):
            stub = tool_result_stub(page.id, messages[i], calls.get(messages[i].tool_call_id), page.token_count)
            replace[keys[i]] = stub
            state.pages.pop(page.id)  # a result page is evicted at once: its stub is its bookmark
            total += count(stub) - counts[i]
            result.evicted.append(page.id)

    # 4. Over budget: cut pages from the free units, then evict until the low-water mark.
    if total > options.budget:
        target = options.budget if recalled_now else options.low_water
        total = yield from _evict(
            messages, keys, position, counts, units, protected, newest_user, state, options, result,
            replace, total, target,
        )

    # 5. Tiers: the best-scoring evicted pages stay warm (a digest), within the room left.
    if options.tiers is not None and state.shown:
        total = yield from _assign_tiers(state, messages, keys, position, options, replace, total, newest_user,
                                         result.evicted_ids)

    # 6. The cold tier: old bookmarks fold into clusters when they pass their share; pages evicted
    #    with no bookmark of their own (smaller than it) go into the nearest cluster now.
    total = yield from _fold(state, position, keys, options, result, replace, total, orphans, orphan_clusters,
                             _unbookmarked(state, result, replace))
    # A page smaller than its bookmark waited for a cluster; folding may have made one only now:
    # still over budget, the resident pages are evicted again (such pages go straight into it).
    if total > options.budget and state.pages and _cluster_shown(state, messages, position, replace):
        total = _measured_total(messages, keys, counts, replace, count)  # not the running estimate
        if total > options.budget:
            before = set(result.evicted)
            target = options.budget if recalled_now else options.low_water
            total = yield from _evict_resident(messages, keys, position, counts, units, protected, state, options,
                                               _policy_context(state, messages, newest_user, options), result,
                                               replace, total, target)
            if not before.issuperset(result.evicted):
                total = yield from _fold(state, position, keys, options, result, replace, total, [], [],
                                         [p for p in _unbookmarked(state, result, replace) if p not in before])

    # 7. The new view, and the updates that turn the input into it.
    if replace:
        view_out, updates = [], []
        for key, message in zip(keys, messages):
            new = replace.get(key, message)
            if new is not None:
                view_out.append(new)
            if key in replace and message.id:
                updates.append(new if new is not None else RemoveMessage(id=message.id))
        result.view, result.updates = view_out, updates
        total = sum(count(m) for m in view_out)
    result.tokens = total
    result.protected_tokens = _protected_tokens(units, protected, keys, counts, state)
    result.over_budget = total > options.budget
    if result.over_budget and not state.warned:
        state.warned = True
        result.first_over_budget = True
    state.tokens, state.budget, state.protected = total, options.budget, result.protected_tokens
    return result


def _reconcile(state: PagingState, messages, keys, position) -> tuple[list[str], list[str]]:
    """Make the state agree with the context (messages removed, bookmarks replaced by the user).

    Returns shown pages and cluster roots whose message left the context.
    """
    for page_id in list(state.pages):
        page = state.pages[page_id]
        ids = [i for i in page.ids if i in position]
        if not ids:  # every message was removed: the page stays stored and recallable
            state.pages.pop(page_id)
            if page.count:
                state.stats[page_id] = [page.count, page.last]
        elif len(ids) != len(page.ids):
            page.ids = ids
    for key in [k for k in state.order if k not in position]:
        del state.order[key]
    orphans = []
    for page_id, shown in state.shown.items():
        at = position.get(shown.anchor)
        if at is None or library_mark(messages[at]).get("bookmark") != page_id:
            orphans.append(page_id)
    orphan_clusters = []
    for cluster_id, cluster in state.clusters.items():
        at = position.get(cluster.anchor)
        if at is None or library_mark(messages[at]).get("cluster") != cluster_id:
            orphan_clusters.append(cluster_id)
    return orphans, orphan_clusters


def _number_new_messages(state: PagingState, messages, keys) -> None:
    """Give messages seen for the first time the next history ordinals (in view order).

    New messages before all the context's older ones (a rewrite put them first, as
    ``REMOVE_ALL_MESSAGES`` with a summary does) are numbered below every ordinal given: their
    pages must rebuild before the older messages and pages, not after them."""
    in_pages = {k for page in state.pages.values() for k in page.ids}
    library = _library_keys(state)
    new = [
        not (key in state.order or key in in_pages or (key in library and library_mark(message)))
        for key, message in zip(keys, messages)
    ]  # (a message that took a library message's id, or only copies its metadata, is new)
    front = new.index(False) if False in new else 0
    for n, (key, is_new) in enumerate(zip(keys, new)):
        if not is_new:
            continue
        if n < front:
            state.order[key] = state.low_order - front + n
        else:
            state.order[key] = state.next_order
            state.next_order += 1
    state.low_order -= front


def _library_keys(state: PagingState) -> set[str]:
    return {s.anchor for s in state.shown.values()} | {c.anchor for c in state.clusters.values()}


def _protected_units(units, messages, keys, newest_user, state, recalled_now, options) -> set[int]:
    """Indexes (into `units`) of units no page may take."""
    library = _library_keys(state)
    latest_group = None
    if newest_user is not None:
        for k in range(len(units) - 1, -1, -1):
            if units[k].start <= newest_user:
                break
            if len(units[k].messages) > 1 or getattr(units[k].messages[0], "tool_calls", None):
                latest_group = k
                break
    protected = set()
    for k, unit in enumerate(units):
        first_key = keys[unit.start]
        if (
            not unit.answered
            or (newest_user is not None and unit.start <= newest_user < unit.end)
            or (latest_group is not None and k >= latest_group)
            or (latest_group is None and newest_user is not None and unit.start > newest_user)
            or (newest_user is None and k == len(units) - 1)
            or first_key in library
            or any(is_pinned(m) for m in unit.messages)
            or any(keys[unit.start + j] in recalled_now for j in range(len(unit.messages)))
            or (options.keep_ids_without_id and any(not m.id for m in unit.messages))
        ):
            protected.add(k)
    return protected


def _large_results(units, protected, keys, counts, state, options) -> list[tuple[Unit, int]]:
    """Tool results over `large_result_tokens` not paged yet (each once, as they arrive)."""
    if options.large_result_tokens is None:
        return []
    formed = {k for page in state.pages.values() for k in page.ids}
    out = []
    for unit in units:
        for j, message in enumerate(unit.messages):
            i = unit.start + j
            if (
                isinstance(message, ToolMessage)
                and message.id
                and counts[i] > options.large_result_tokens
                and keys[i] not in formed
                and not library_mark(message)
                and not recall_copy_pages(message)
            ):
                out.append((unit, i))
    return out


def _stub_is_shorter(message: ToolMessage, call, tokens: int, count) -> bool:
    """True when the result's stub is shorter than the result: a stub must never make the context
    bigger. Measured with a page id longer than any real one."""
    return count(tool_result_stub("p999999", message, call, tokens)) < tokens


def _form(drafts: list[_Draft], state, options, keys, counts, messages, result):
    """Give drafts ids, bookmarks and features; record them as resident pages (a generator)."""
    stored = [[_stored_form(m) for m in d.messages] for d in drafts]
    digests = [messages_digest(msgs) for msgs in stored]
    numbers = yield Reserve("p", digests, state)
    page_drafts = [PageDraft(f"p{n}", msgs) for n, msgs in zip(numbers, stored, strict=True)]
    bookmarks: list[Bookmark] = yield MakeBookmarks(options.bookmarker, page_drafts, _bookmark_context(
        state, stored, options))
    if len(bookmarks) != len(page_drafts):
        raise ValueError(f"The bookmarker returned {len(bookmarks)} bookmarks for {len(page_drafts)} pages.")
    features = yield ComputeFeatures(options.policy, stored)
    pages = []
    for draft, page_draft, msgs, digest, bookmark, feats in zip(
        drafts, page_drafts, stored, digests, bookmarks, features, strict=True
    ):
        tokens = sum(counts[u.start + j] for u in draft.units for j in range(len(u.messages)))
        ids = [keys[u.start + j] for u in draft.units for j in range(len(u.messages))]
        order = state.order.get(ids[0], state.next_order)
        if draft.kind == "page":  # a tool result paged on arrival keeps its stub's ordinal
            for k in ids:
                state.order.pop(k, None)
        page = Page(
            id=page_draft.id, messages=msgs, bookmark=bookmark.text, keywords=list(bookmark.keywords),
            token_count=tokens,
            boundary="tool_result" if draft.kind == "tool_result" else options.boundary.name,
            created_turn=state.turn, order=order, digest=digest, kind=draft.kind,
            features={**feats, "terms": dict(bookmark.terms)}, last_access=state.turn,
        )
        state.pages[page.id] = ResidentPage(
            ids=ids, order=order, tokens=tokens, turn=state.turn, last=state.turn, bookmark=bookmark.text, digest=digest,
            terms=dict(bookmark.terms), features=dict(feats),
        )
        pages.append(page)
    result.pages.extend(pages)
    result.formed.extend(p.id for p in pages)
    return pages


def _bookmark_context(state: PagingState, drafts: list[list[BaseMessage]], options) -> BookmarkContext:
    """Page frequencies over the thread (a bounded sketch of its frequent terms), counting the
    pages formed now."""
    for msgs in drafts:
        state.count_terms(set(search_terms("\n".join(message_text(m) for m in msgs))))
    return BookmarkContext(count_text=options.count_text, doc_freq=dict(state.doc_freq), n_docs=state.n_pages)


def _evict(messages, keys, position, counts, units, protected, newest_user, state, options, result,
           replace, total, target):
    """Cut pages from the free units and evict until `total <= target` (a generator)."""
    formed = {k for page in state.pages.values() for k in page.ids}
    pinned = {k for k, u in enumerate(units) if any(is_pinned(m) for m in u.messages)}
    closed, open_tails = [], []
    for run_units, following, permanent in _free_runs(units, protected, keys, formed, _library_keys(state),
                                                      pinned, state.order):
        pages, tail = _cut(run_units, following, options.boundary, options.count_message)
        closed += pages
        if tail and permanent:  # nothing can ever join it: it is a page now
            closed.append(tail)
        elif tail:
            open_tails.append(tail)
    if closed:
        yield from _form([_Draft(units_) for units_ in closed], state, options, keys, counts, messages, result)
    context = _policy_context(state, messages, newest_user, options)
    while True:
        total = yield from _evict_resident(messages, keys, position, counts, units, protected, state, options,
                                           context, result, replace, total, target)
        if total <= target or not open_tails:
            return total
        # Nothing else to evict: the still-open tails become pages too.
        yield from _form([_Draft(t) for t in open_tails], state, options, keys, counts, messages, result)
        open_tails = []


def _policy_context(state: PagingState, messages, newest_user, options) -> PolicyContext:
    return PolicyContext(turn=state.turn, recent_text=_recent_text(messages, newest_user, options.recent_messages))


def _evict_resident(messages, keys, position, counts, units, protected, state, options, context, result,
                    replace, total, target):
    """Evict resident pages and recall results until `total <= target` (a generator); pages whose
    messages changed while resident are stored under new numbers."""
    candidates = _candidates(messages, keys, position, counts, units, protected, state, replace,
                             options.count_message)
    restored: list[Page] = []
    total = _evict_loop(candidates, state, options, context, messages, keys, position, counts, replace,
                        result, total, target, restored)
    if restored:
        yield from _renumber(restored, state, replace, result)
    return total


def _measured_total(messages, keys, counts, replace, count) -> int:
    """Tokens of the view as the step has left it so far."""
    return sum(c if (new := replace.get(k, m)) is m else count(new)
               for k, m, c in zip(keys, messages, counts) if replace.get(k, m) is not None)


def _free_runs(units, protected, keys, formed, library, pinned, order):
    """Maximal runs of units no page holds and nothing protects, each with the unit after it
    (None when nothing can ever join the run: a page, a bookmark, a pinned message, or a gap
    in the history where a page left), and whether the run is closed for good."""
    runs, current = [], []
    last = None
    for k, unit in enumerate(units):
        unit_keys = [keys[unit.start + j] for j in range(len(unit.messages))]
        free = k not in protected and not any(key in formed for key in unit_keys)
        if free and current and order.get(unit_keys[0], -2) != last + 1:
            runs.append((current, None, True))  # a page once stood between: history is not contiguous
            current = []
        if free:
            current.append(unit)
            last = order.get(unit_keys[-1], -2)
        elif current:
            permanent = any(key in formed or key in library for key in unit_keys) or k in pinned
            runs.append((current, None if permanent else unit, permanent))
            current = []
    if current:
        runs.append((current, None, False))
    return runs


def _shrunk_copy(message: BaseMessage | None) -> bool:
    """True for a recall result this step shrank (its page stays evictable)."""
    return message is not None and bool(recall_copy_pages(message)) and bool(library_mark(message).get("shrunk"))


def _candidates(messages, keys, position, counts, units, protected, state, replace, count) -> list[Candidate]:
    """Resident pages (as this step left them), and unshrunk recall results outside protected units."""
    out = []
    for page_id, page in state.pages.items():
        where = [position[k] for k in page.ids]
        current = [replace.get(keys[i], messages[i]) for i in where]
        if not all(m is messages[i] or _shrunk_copy(m) for m, i in zip(current, where)):
            continue
        out.append(
            Candidate(
                key=page_id, kind="page", page_ids=(page_id,), position=where[0],
                tokens=sum(counts[i] if m is messages[i] else count(m) for m, i in zip(current, where)),
                created_turn=page.turn, last_access=page.last, access_count=page.count,
                messages=tuple(current), features=page.features,
            )
        )
    protected_keys = {keys[u.start + j] for k in protected for u in (units[k],) for j in range(len(u.messages))}
    for i, message in enumerate(messages):
        pages = recall_copy_pages(message)
        if not pages or library_mark(message).get("shrunk") or keys[i] in protected_keys or keys[i] in replace:
            continue
        stats = [state.access(p) for p in pages]
        last = max((s[1] for s in stats), default=state.turn)
        out.append(
            Candidate(
                key=keys[i], kind="copy", page_ids=tuple(pages), position=i, tokens=counts[i],
                created_turn=last, last_access=last, access_count=max((s[0] for s in stats), default=1),
                messages=(message,),
            )
        )
    return out


def _importance(messages) -> float:
    """The strongest explicit importance marker among messages (1.0 when none sets one)."""
    weights = [library_mark(m).get("importance") for m in messages]
    return max([float(w) for w in weights if isinstance(w, (int, float))], default=1.0)


def _tier_victim(tiers: TierMode, candidates, context: PolicyContext, state: PagingState):
    """The candidate the tier scoring ranks lowest."""
    items = [TierItem(c.key, c.tokens, c.created_turn, c.last_access, c.access_count,
                      state.pages[c.key].terms if c.key in state.pages else {}, _importance(c.messages))
             for c in candidates]
    scores = tiers.scores(items, turn=context.turn, recent_terms=search_terms(context.recent_text))
    return min(zip(candidates, items), key=lambda ci: (tiers.rank_key(ci[1], scores[ci[0].key]),
                                                       ci[0].position))[0]


def _evict_loop(candidates, state, options, context, messages, keys, position, counts, replace, result,
                total, target, restored) -> int:
    count = options.count_message
    hot_budget = options.tiers.hot_budget(options.budget) if options.tiers else None
    # a page smaller than its bookmark goes straight into the nearest cluster; with none yet, such
    # pages wait until together they outweigh the cluster bookmark the first of them starts
    clustered = _cluster_shown(state, messages, position, replace) or bool(_unbookmarked(state, result, replace))
    waiting, waiting_tokens = [], 0

    def hot() -> int:
        return sum(c.tokens for c in candidates if c.kind == "page")

    while candidates and (total > target or (hot_budget is not None and hot() > hot_budget)):
        if options.tiers is not None:
            victim = _tier_victim(options.tiers, candidates, context, state)
        else:
            victim = options.policy.victim(candidates, context)
        candidates = [c for c in candidates if c.key != victim.key]
        if victim.kind == "copy":
            shrunk = shrink_recall_copy(messages[victim.position])
            saved = victim.tokens - count(shrunk)
            if saved <= 0:
                continue
            replace[victim.key] = shrunk
            total -= saved
            context.evicted.append(victim)
            continue
        page = state.pages[victim.key]
        bookmark = bookmark_message(victim.key, page.bookmark, page.ids[0])
        current = [replace.get(k, messages[position[k]]) for k in page.ids]
        page_tokens = sum(count(m) for m in current if m is not None)
        if count(bookmark) >= page_tokens and not clustered:
            waiting.append(victim)
            waiting_tokens += page_tokens
            first_cluster = _cluster_cost(state.pages[waiting[0].key], waiting[0].key, state, options)
            if waiting_tokens <= first_cluster:
                continue
            total += first_cluster
            clustered, evicting, waiting = True, waiting, []
        elif count(bookmark) >= page_tokens and page_tokens <= _join_growth(page, victim.key, state, options,
                                                                            messages, position, replace):
            continue  # going straight into the cluster would grow its bookmark by more than it saves
        else:
            evicting = [victim]
        for chosen in evicting:
            total -= _evict_page(chosen.key, state, options, messages, position, replace, result,
                                  restored)
            # copies inside the page leave with it
            left = result.evicted_ids[chosen.key]
            candidates = [c for c in candidates if c.kind != "copy" or c.key not in left]
            context.evicted.append(chosen)
    return total


def _renumber(restored: list[Page], state: PagingState, replace, result):
    """Give pages whose messages changed while resident new numbers (a generator): the record
    under the old number may be another branch's (it was stored before a fork), never rewritten."""
    numbers = yield Reserve("p", [p.digest for p in restored], state)
    for page, number in zip(restored, numbers, strict=True):
        old, new = page.id, f"p{number}"
        shown = state.shown.pop(old)
        shown.bookmark = shown.bookmark.replace(f"[{old}:", f"[{new}:", 1)
        state.shown[new] = shown
        page.id, page.bookmark = new, shown.bookmark
        if replace.get(shown.anchor) is not None:
            replace[shown.anchor] = bookmark_message(new, shown.bookmark, shown.anchor)
        result.evicted_ids[new] = result.evicted_ids.pop(old)
        result.evicted[result.evicted.index(old)] = new
        result.pages.append(page)


def _cluster_shown(state: PagingState, messages, position, replace=None) -> bool:
    """True when a cluster bookmark is in the view (as this step left it, with `replace`): a page
    can join it at no cost."""
    def shown(key: str) -> BaseMessage | None:
        return (replace or {}).get(key, messages[position[key]])

    return any(c.anchor in position and (m := shown(c.anchor)) is not None
               and library_mark(m).get("cluster") == cid for cid, c in state.clusters.items())


def _join_growth(page: ResidentPage, page_id: str, state: PagingState, options, messages, position,
                 replace) -> int:
    """Tokens a cluster bookmark in the view would grow by if this page joined it (the most of
    any such cluster; 0 with none)."""
    n = page_number(page_id)
    growth = 0
    for cid, c in state.clusters.items():
        shown = replace.get(c.anchor, messages[position[c.anchor]]) if c.anchor in position else None
        if shown is None or library_mark(shown).get("cluster") != cid:
            continue
        ranked = sorted(merge_terms(c.terms, page.terms).items(), key=lambda tw: (-tw[1], tw[0]))
        keywords = [t for t, _ in ranked][: options.clusters.max_keywords]
        text = format_cluster_bookmark(cid, keywords, min(c.first, n), max(c.last, n), c.size + 1)
        growth = max(growth, options.count_message(cluster_message(cid, text, c.anchor)) - options.count_message(shown))
    return growth


def _cluster_cost(page: ResidentPage, page_id: str, state: PagingState, options) -> int:
    """Tokens of the cluster bookmark this page would start, or make joining a cluster not in the
    view (the largest such): an upper estimate, with a cluster id longer than most."""
    n = page_number(page_id)
    shapes = [(page.terms, n, n, 1)]
    shapes += [(merge_terms(c.terms, page.terms), min(c.first, n), max(c.last, n), c.size + 1)
               for c in state.clusters.values()]
    costs = []
    for terms, first, last, size in shapes:
        ranked = sorted(terms.items(), key=lambda tw: (-tw[1], tw[0]))
        keywords = [t for t, _ in ranked][: options.clusters.max_keywords]
        text = format_cluster_bookmark("c0000", keywords, first, last, size)
        costs.append(options.count_message(cluster_message("c0000", text, page.ids[0])))
    return max(costs)


def _evict_page(page_id, state, options, messages, position, replace, result, restored) -> int:
    """Evict a resident page: its bookmark replaces its messages, or nothing when the bookmark is no
    smaller (a bookmark must never make the context bigger: the page goes straight into the nearest
    cluster when the step folds). Returns the tokens saved."""
    count = options.count_message
    page = state.pages.pop(page_id)
    bookmark = bookmark_message(page_id, page.bookmark, page.ids[0])
    cost = count(bookmark)
    current = [replace.get(k, messages[position[k]]) for k in page.ids]
    page_tokens = sum(count(m) for m in current if m is not None)
    direct = cost >= page_tokens
    if messages_digest([_stored_form(m) for m in current if m is not None]) != page.digest:
        restored.append(_restored_page(page_id, page, current, options, state))  # renumbered: see _renumber
    state.shown[page_id] = ShownPage(
        anchor=page.ids[0], tokens=cost, page_tokens=page_tokens, turn=page.turn, last=page.last,
        count=page.count, terms=dict(page.terms), bookmark=page.bookmark,
        weight=_importance(m for m in current if m is not None),
    )
    replace[page.ids[0]] = None if direct else bookmark
    for k in page.ids[1:]:
        replace[k] = None
    result.evicted_ids[page_id] = list(page.ids)
    result.evicted.append(page_id)
    return page_tokens - (0 if direct else cost)


def _restored_page(page_id, page: ResidentPage, current, options, state) -> Page:
    """A page whose messages changed while resident (edited or removed) is stored again as it is."""
    msgs = [_stored_form(m) for m in current if m is not None]
    return Page(
        id=page_id, messages=msgs, bookmark=page.bookmark, keywords=[], token_count=page.tokens,
        boundary=options.boundary.name, created_turn=page.turn, order=page.order, digest=messages_digest(msgs),
        features={**page.features, "terms": dict(page.terms)},
    )


def _assign_tiers(state, messages, keys, position, options, replace, total, newest_user, evicted_ids):
    """Choose the warm pages among those shown (a generator): best rank first while their
    digests fit the warm budget and the room the budget leaves; the others are cold."""
    tiers = options.tiers
    count = options.count_message
    shown = {pid: s for pid, s in state.shown.items() if s.anchor in position}
    costs = {pid: max(8, int(s.page_tokens * tiers.digest_ratio)) for pid, s in shown.items()}
    items = [TierItem(pid, costs[pid], s.turn, s.last, s.count, s.terms, s.weight) for pid, s in shown.items()]
    context = _recent_text(messages, newest_user, options.recent_messages)
    scores = tiers.scores(items, turn=state.turn, recent_terms=search_terms(context))
    ranked = sorted(items, key=lambda i: (-tiers.rank_key(i, scores[i.id]), page_number(i.id)))
    room = min(tiers.warm_budget(options.budget), options.budget - total + sum(
        s.tokens for s in shown.values() if s.tier == "warm"))
    warm, used = [], 0
    for item in ranked:
        if used + costs[item.id] <= room:
            warm.append(item.id)
            used += costs[item.id]
    promote = [pid for pid in warm if shown[pid].tier == "cold"]
    demote = [pid for pid in shown if shown[pid].tier == "warm" and pid not in warm]
    # a page evicted this step still has its messages in the context; older ones are loaded
    in_view = {pid: [messages[position[k]] for k in evicted_ids.get(pid, []) if k in position]
               for pid in promote}
    missing = [pid for pid in promote if not in_view[pid]]
    loaded = (yield LoadPages(missing)) if missing else {}
    sources = {pid: [_stored_form(m) for m in in_view[pid]] or (loaded[pid].messages if pid in loaded else [])
               for pid in promote}
    written: dict[str, str | None] = {}
    digester = tiers.digester
    if digester is not None:
        written = {pid: digester.ready(sources[pid]) for pid in promote if sources[pid]}
        todo = [pid for pid, text in written.items() if text is None]
        if todo and not getattr(digester, "background", True):
            texts = yield MakeDigests(digester, [sources[p] for p in todo], [costs[p] for p in todo])
            written.update(zip(todo, texts))
    for pid in promote:
        page_messages_ = sources[pid]
        if not page_messages_:
            continue
        digest = written.get(pid) or extractive_digest(page_messages_, shown[pid].terms, max_tokens=costs[pid],
                                                       count_text=options.count_text)
        if not digest:
            continue
        message = digest_message(pid, digest, len(page_messages_), shown[pid].anchor)
        before, tokens = shown[pid].tokens, count(message)
        if total - before + tokens > options.budget:
            continue  # the digest's header and framing do not fit after all: the page stays cold
        shown[pid].tier, shown[pid].tokens = "warm", tokens
        replace[shown[pid].anchor] = message
        total += shown[pid].tokens - before
    for pid in demote:
        message = bookmark_message(pid, shown[pid].bookmark, shown[pid].anchor)
        before = shown[pid].tokens
        shown[pid].tier, shown[pid].tokens = "cold", count(message)
        replace[shown[pid].anchor] = message
        total += shown[pid].tokens - before
    return total


def _unbookmarked(state: PagingState, result: PagingResult, replace) -> list[str]:
    """Pages this step evicted straight into a cluster: shown, but no message shows them yet."""
    return [pid for pid in result.evicted
            if pid in state.shown and replace.get(state.shown[pid].anchor, "") is None]


def _foreign_anchors(state: PagingState, orphans, orphan_clusters) -> set[str]:
    """Anchors of orphans: the message there now, if any, is someone else's (a new message that
    reuses the id of a bookmark's first message)."""
    return {state.shown[p].anchor for p in orphans} | {state.clusters[c].anchor for c in orphan_clusters}


def _fold(state, position, keys, options, result, replace, total, orphans, orphan_clusters, direct):
    """Fold old bookmarks into clusters when they pass their share, and the pages evicted with no
    bookmark (`direct`) into the nearest cluster or a new one (a generator)."""
    def count_bookmark(text: str) -> int:
        return options.count_message(cluster_message("c0", text, "x"))

    foreign = _foreign_anchors(state, orphans, orphan_clusters)
    displaced = [cid for cid in orphan_clusters if state.clusters[cid].anchor in position]
    if foreign:  # another message took their id: it is not ours to replace or remove
        position = {k: i for k, i in position.items() if k not in foreign}
    plan = plan_folds(state, position, options.clusters, count_bookmark=count_bookmark, orphans=orphans,
                      orphan_clusters=orphan_clusters, direct=direct, displaced=displaced)
    # Orphans nothing could take stay recallable by id and search, just not listed.
    for page_id in orphans:
        if page_id not in plan.folded:
            shown = state.shown.pop(page_id)
            if shown.count:
                state.stats[page_id] = [shown.count, shown.last]
    for cluster_id in orphan_clusters:
        if not any(cluster_id in n.children for n in plan.nodes):
            state.clusters.pop(cluster_id)
            plan.roots.pop(cluster_id, None)
    if not plan:
        return total
    numbers = yield Reserve("c", [n.digest for n in plan.nodes], state)
    nodes, entries, _ = materialize(plan, numbers, max_keywords=options.clusters.max_keywords)
    consumed_anchors = {state.shown[p].anchor for p in plan.folded} | set(plan.removed_anchors)
    for page_id in plan.folded:
        shown = state.shown.pop(page_id)
        if shown.count:
            state.stats[page_id] = [shown.count, shown.last]
    for cluster_id in list(state.clusters):
        if cluster_id not in plan.roots:
            consumed_anchors.add(state.clusters.pop(cluster_id).anchor)
    for cluster_id, entry in entries.items():
        message = cluster_message(cluster_id, entry.text, entry.anchor)
        entry.tokens = options.count_message(message)
        state.clusters[cluster_id] = entry
        if entry.anchor in position:
            replace[entry.anchor] = message
    kept = {e.anchor for e in state.clusters.values()}
    for anchor in consumed_anchors - kept:
        if anchor in position:
            replace[anchor] = None
    result.nodes.extend(nodes)
    result.folded.extend(plan.folded)
    return total


def _protected_tokens(units, protected, keys, counts, state) -> int:
    """Tokens no eviction can free: the protected units (measured on the input) and the
    bookmarks and clusters the step leaves (an estimate good enough to warn and size recalls)."""
    library = _library_keys(state)
    total = sum(counts[u.start + j] for k in protected for u in (units[k],) for j in range(len(u.messages))
                if keys[u.start] not in library)
    return total + sum(s.tokens for s in state.shown.values()) + sum(c.tokens for c in state.clusters.values())


# -- pure API -----------------------------------------------------------------------------


def _options(
    *, max_tokens, low_water_tokens, boundary, policy, bookmarker, token_counter, text_counter,
    recent_messages, bookmark_share, large_result_share, tiers=None,
) -> StepOptions:
    if max_tokens <= 0:
        raise ValueError("`max_tokens` must be a positive number of tokens.")
    low = low_water_tokens if low_water_tokens is not None else max(1, int(max_tokens * 0.75))
    if not 0 < low <= max_tokens:
        raise ValueError("`low_water_tokens` must be positive and at most `max_tokens`.")
    text_counter = text_counter or TokenCounter()
    count_message = text_counter.count_message if token_counter is None else (lambda m: token_counter([m]))
    return StepOptions(
        budget=max_tokens, low_water=low, boundary=get_boundary(boundary), policy=get_policy(policy),
        bookmarker=as_bookmarker(bookmarker),
        clusters=ClusterOptions.for_share(max(1, int(max_tokens * bookmark_share))),
        count_message=count_message, count_text=text_counter.count_text,
        large_result_tokens=None if large_result_share is None else max(1, int(max_tokens * large_result_share)),
        recent_messages=recent_messages, tiers=get_tiers(tiers),
    )


def page_messages(
    messages: Sequence[BaseMessage],
    *,
    max_tokens: int,
    state: Any = None,
    low_water_tokens: int | None = None,
    boundary: str | BoundaryStrategy = "fixed_20",
    policy: str | EvictionPolicy = "fifo",
    bookmarker: Bookmarker | Callable | None = None,
    token_counter: Callable[[Sequence[BaseMessage]], int] | None = None,
    text_counter: TokenCounter | None = None,
    recent_messages: int = 6,
    bookmark_share: float = 0.2,
    large_result_share: float | None = 0.5,
    tiers: TierMode | str | None = None,
    pages: Mapping[str, Page] | None = None,
) -> PagingResult:
    """Page out old messages until the context fits, leaving bookmarks in their place.

    When the messages exceed `max_tokens`, those before the newest user message (and tool
    groups of the current turn older than the latest one) are cut into pages by `boundary`,
    and `policy` evicts pages (or shrinks earlier recall results) until the context is at
    most `low_water_tokens`. When bookmarks pass `bookmark_share` of the budget, the oldest
    fold into cluster bookmarks. Pages, once cut, keep their boundaries, and a page bookmark
    once written never changes. Pass the returned `state` to the next call; store
    `result.pages` (and `result.nodes`) if you want to recall them.

    Args:
        messages: The context (the state's messages), each with an id.
        max_tokens: Budget for everything the model receives from the list.
        state: The previous call's `result.state` (None for a new thread).
        low_water_tokens: Page down to this when over budget (default 75% of `max_tokens`).
        boundary: Boundary strategy or its name (`fixed_20`, `exchange`, `session`, ...).
        policy: Eviction policy or its name (`fifo`, `lru`, `lfu`, `semantic`).
        bookmarker: A `Bookmarker` (default `KeywordBookmarker`) or a function.
        token_counter: Counts a message list (default tiktoken via `TokenCounter`).
        text_counter: tiktoken counter for bookmark lengths.
        recent_messages: Messages before the newest user message that count as recent context.
        bookmark_share: Share of `max_tokens` bookmarks may take before old ones fold into clusters.
        large_result_share: A tool result above this share of `max_tokens` is paged as it arrives
            (None: never).
        tiers: Hot/warm/cold tier scoring (`langmem_paging.tiers`), or None.
        pages: Pages stored by earlier calls, by id (tiers may show an older page's digest).

    Returns:
        A `PagingResult`.

    Raises:
        ValueError: If a budget is not positive or inconsistent.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> history = []
        >>> for i in range(6):
        ...     history += [HumanMessage(f"Trip {i} to city{i}?", id=f"h{i}"),
        ...                 AIMessage(f"Booked city{i}.", id=f"a{i}")]
        >>> result = page_messages(history, max_tokens=8, low_water_tokens=6,
        ...                        boundary="fixed_2", token_counter=len, bookmark_share=1.0)
        >>> [m.content for m in result.view]
        ['[p1:city0,Booked,Trip]', '[p2:city1,Booked,Trip]', '[p3:city2,Booked,Trip]', '[p4:city3,Booked,Trip]', '[p5:city4,Booked,Trip]', 'Trip 5 to city5?', 'Booked city5.']
        >>> [p.id for p in result.pages], result.tokens
        (['p1', 'p2', 'p3', 'p4', 'p5'], 7)

        Once bookmarks pass `bookmark_share` of the budget, the oldest fold into a cluster:

        >>> result = page_messages(history, max_tokens=8, low_water_tokens=6,
        ...                        boundary="fixed_2", token_counter=len, bookmark_share=0.4)
        >>> [m.content for m in result.view]
        ['[c8:city0,city1,city4,Booked,Trip|3 of p1-p5]', '[c6:city2,city3,Booked,Trip|p3-p4]', 'Trip 5 to city5?', 'Booked city5.']
    """
    options = _options(
        max_tokens=max_tokens, low_water_tokens=low_water_tokens, boundary=boundary, policy=policy,
        bookmarker=bookmarker, token_counter=token_counter, text_counter=text_counter,
        recent_messages=recent_messages, bookmark_share=bookmark_share, large_result_share=large_result_share,
        tiers=tiers,
    )
    return run(paging_step(messages, state, options), LocalHandlers(pages))


async def apage_messages(messages: Sequence[BaseMessage], **kwargs: Any) -> PagingResult:
    """Async `page_messages`: awaits async bookmarkers and policies."""
    options = _options(
        max_tokens=kwargs.pop("max_tokens"), low_water_tokens=kwargs.pop("low_water_tokens", None),
        boundary=kwargs.pop("boundary", "fixed_20"), policy=kwargs.pop("policy", "fifo"),
        bookmarker=kwargs.pop("bookmarker", None), token_counter=kwargs.pop("token_counter", None),
        text_counter=kwargs.pop("text_counter", None), recent_messages=kwargs.pop("recent_messages", 6),
        bookmark_share=kwargs.pop("bookmark_share", 0.2), large_result_share=kwargs.pop("large_result_share", 0.5),
        tiers=kwargs.pop("tiers", None),
    )
    state, pages = kwargs.pop("state", None), kwargs.pop("pages", None)
    if kwargs:
        raise TypeError(f"Unexpected arguments: {', '.join(sorted(kwargs))}.")
    return await arun(paging_step(messages, state, options), LocalHandlers(pages))


# -- losslessness ------------------------------------------------------------------------


def reconstruct_history(
    messages: Sequence[BaseMessage],
    pages: Mapping[str, Page] | Callable[[str], Page | None],
    counter: TokenCounter | None = None,
    *,
    clusters: Mapping[str, ClusterNode] | Callable[[str], ClusterNode | None] | None = None,
    state: Any = None,
) -> list[BaseMessage]:
    """The original history from the context and the stored pages, exactly.

    Bookmarks expand to their page's messages, cluster bookmarks to their member pages,
    shrunk recall results and paged tool results to their full text. With the branch's
    paging `state`, everything is put back in history order (pages and resident messages
    carry history ordinals); without it, expansions stay where their bookmark is. Messages
    that only look like ours (no such page) are kept as they are.

    Args:
        messages: The state's messages.
        pages: Stored pages by id (a mapping, or a function such as ``lambda p: store.get(t, p)``).
        counter: Tokenizer used to re-render recall results (default cl100k).
        clusters: Stored cluster nodes by id, to expand cluster bookmarks.
        state: The paging state (``state["paging"]``), to restore history order.
    """
    get_page = pages.get if isinstance(pages, Mapping) else pages
    get_node = (clusters.get if isinstance(clusters, Mapping) else clusters) if clusters is not None else None
    counter = counter or TokenCounter()
    branch = PagingState.from_value(state) if state is not None else None
    in_pages = {k: (p.order, i) for p in branch.pages.values() for i, k in enumerate(p.ids)} if branch else {}

    def member_pages(cluster_id: str) -> list[Page] | None:
        ids, stack = [], [cluster_id]
        while stack:
            node = get_node(stack.pop()) if get_node else None
            if node is None:
                return None
            for child in node.children:
                (ids if child.startswith("p") else stack).append(child)
        found = [get_page(pid) for pid in set(ids)]
        return None if any(p is None for p in found) else sorted(found, key=lambda p: (p.order, page_number(p.id)))

    def restore(message: BaseMessage) -> BaseMessage:
        mark = library_mark(message)
        if "paged_result" in mark and (page := get_page(mark["paged_result"])) is not None and _stub_of(message, page):
            return page.messages[0]
        if isinstance(message, ToolMessage) and recall_copy_pages(message) and mark.get("shrunk"):
            return expand_recall_copy(message, get_page, counter, get_node)
        return message

    segments: list[tuple[tuple, list[BaseMessage]]] = []
    resident: list[int] = []  # segments holding a message of the list itself
    for n, message in enumerate(messages):
        mark = library_mark(message) if _shows_a_page(branch, message) else {}
        members: list[Page] | None = None
        if "bookmark" in mark and (page := get_page(mark["bookmark"])) is not None:
            members = [page]
        elif "cluster" in mark:
            members = member_pages(mark["cluster"])
        if members is not None:
            for page in members:
                segments.append(((page.order, 0, n), [restore(m) for m in page.messages]))
            continue
        if branch is not None and message.id in branch.order:
            key = (branch.order[message.id], 0, n)
        elif message.id in in_pages:
            key = (in_pages[message.id][0], in_pages[message.id][1], n)
        else:
            key = (segments[-1][0][0] if segments else -1, 1 << 30, n)
        resident.append(len(segments))
        segments.append((key, [restore(message)]))
    if branch is not None:
        _keep_list_order(segments, resident)
        segments.sort(key=lambda s: s[0])
    return [m for _, ms in segments for m in ms]


def _stub_of(message: BaseMessage, page: Page) -> bool:
    """True if `message` is the stub of the tool result `page` holds (same id and call id), not a
    message that only copies a stub's metadata (a user message carrying it was replaced by the
    page's first message)."""
    original = page.messages[0] if page.kind == "tool_result" and len(page.messages) == 1 else None
    return (
        isinstance(message, ToolMessage)
        and isinstance(original, ToolMessage)
        and original.id == message.id
        and original.tool_call_id == message.tool_call_id
    )


def _shows_a_page(branch: PagingState | None, message: BaseMessage) -> bool:
    """True if `message` is a bookmark or cluster bookmark the branch's state shows (without a
    state, any message marked as one): a user's message carrying copied metadata is not."""
    if branch is None:
        return True
    mark = library_mark(message)
    shown, cluster = branch.shown.get(mark.get("bookmark")), branch.clusters.get(mark.get("cluster"))
    return (shown is not None and shown.anchor == message.id) or (cluster is not None and cluster.anchor == message.id)


def _keep_list_order(segments: list[tuple[tuple, list[BaseMessage]]], resident: list[int]) -> None:
    """Lower the sort keys of the list's own messages so they never pass one another: the list's
    order is the history's, also where it was rewritten (``REMOVE_ALL_MESSAGES`` put a summary, or
    a repaired tool call's result, before messages numbered earlier). Page expansions still go
    where their ordinals say."""
    floor = None
    for i in reversed(resident):
        key, content = segments[i]
        if floor is not None and key[:2] > floor:
            segments[i] = ((*floor, key[2]), content)
        floor = segments[i][0][:2]
