"""The recall service: plan -> read -> size -> render, as a flow of requests.

A recall reads only what the running branch may see (its paging state decides), sizes its
result to the room the budget leaves beside what nothing may evict (the next step makes that
room), and renders pages, parts of long pages, search passages and cluster listings within it.
It is a generator of requests (`langmem_paging.runtime.thread_io`), so sync and async differ only in
the driver. A store or index failure comes back as an error result asking the model to try
again; nothing the model sends makes it raise.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace

from langchain_core.messages import BaseMessage, HumanMessage

from langmem_paging.config import PagingConfig
from langmem_paging.core.effects import ask
from langmem_paging.core.errors import StorageError
from langmem_paging.core.hooks import PageEvent, PagingHooks
from langmem_paging.core.messages import library_mark, split_units
from langmem_paging.core.records import Page, cluster_number, page_number
from langmem_paging.core.state import PagingState
from langmem_paging.core.tokens import TokenCounter, message_text
from langmem_paging.index.base import best_pages
from langmem_paging.recall.compose import (
    Composer,
    RecallRead,
    edited_page,
    hit_limit,
    listed_ids,
    page_limit,
    visible_on,
)
from langmem_paging.recall.io import ListMembers, LoadClusters, Notify, RecallFlow, ScoreTexts, Search
from langmem_paging.recall.passages import adjacent_pages
from langmem_paging.recall.plan import RecallPlan, plan_recall
from langmem_paging.recall.render import (
    PART_MIN_TOKENS,
    render_page,
)
from langmem_paging.recall.request import RecallAnswer, RecallRequest, ResidentTurn, Served
from langmem_paging.step.io import LoadPages
from langmem_paging.step.result import PagingValue
from langmem_paging.strategies.bookmarks import Bookmarker

__all__ = [
    "RECALL_UNAVAILABLE",
    "RecallAnswer",
    "RecallRequest",
    "RecallService",
    "Served",
    "holds_text",
    "resident_turns",
]

logger = logging.getLogger("langmem_paging")

CLUSTER_MEMBERS_LISTED = 40
FOLDED_BOOKMARKS = 3
"""Bookmarks set aside beside a recall result, in bookmark sizes: what the others fold into (a
cluster bookmark, with its page span, is about twice a page bookmark)."""
PART_OVERHEAD = 80
"""Tokens a page's part takes beside its text: its header and its note ("p3 is long: part 1 of
12; recall(page_ids=['p3'], part=2) for more.")."""
RECALL_UNAVAILABLE = (
    "{tool} failed: the paged-out history is unavailable right now (the page store did not answer). "
    "Try the same {tool} call again in a moment; nothing was lost."
)
"""The error result of a recall the store did not answer (``.format(tool=tool_name)``)."""


class RecallService:
    """Recalls for one configuration.

    Args:
        config: The paging options.
        bookmarker: The bookmarker the steps use (its size sets aside room for new bookmarks).
        hooks: Told when pages are recalled.
    """

    def __init__(
        self, config: PagingConfig, *, bookmarker: Bookmarker, hooks: Sequence[PagingHooks] = ()
    ) -> None:
        self.config, self.bookmarker, self.hooks = config, bookmarker, list(hooks)

    def flow(
        self, thread_id: str, state: PagingValue, request: RecallRequest, counter: TokenCounter
    ) -> RecallFlow[RecallAnswer]:
        """Text of the asked pages, clusters and search passages visible on `state`'s branch."""
        branch = PagingState.from_value(state)
        request = replace(request, resident=_outside_pages(request.resident, branch))
        plan = plan_recall(request.page_ids, request.query, request.part)
        tool = self.config.tool_name
        unavailable = RECALL_UNAVAILABLE.format(tool=tool)
        wanted, clusters, notes = _resolve(plan, branch, request.served, tool)
        elsewhere = [p for p in plan.page_ids if p in request.served]
        cap = self.room_for(branch, counter, share=request.share, call_tokens=request.call_tokens)
        try:
            loaded = [*wanted, *(p for p in elsewhere if visible_on(branch, p))]
            read = yield from self._read(plan, branch, loaded, clusters, cap, request.resident)
            read.pages = {pid: edited_page(page, request.edits) for pid, page in read.pages.items()}
            notes[:0] = _elsewhere_notes(elsewhere, request.served, read.pages, counter, tool)
            composer = Composer(self.config, plan, branch, read, counter, cap, request)
            answer = yield from composer.answer(wanted, notes)
        except StorageError as error:
            logger.warning(
                "recall on thread %s: %s; the model is told to try again", thread_id, error, exc_info=error
            )
            return RecallAnswer(unavailable, {}, [], branch.turn, status="error")
        if answer.accessed and self.hooks:
            event = PageEvent(thread_id, list(dict.fromkeys(answer.accessed)), answer.turn)
            yield from ask(Notify(self.hooks, [("recalled", event)]))
        return answer

    def _read(
        self,
        plan: RecallPlan,
        branch: PagingState,
        wanted: list[str],
        clusters: list[str],
        room: int,
        resident: Sequence[ResidentTurn],
    ) -> RecallFlow[RecallRead]:
        read = RecallRead()
        if plan.query is not None:
            # resident pages too: the room the result takes pushes them out at the next step
            read.hits = yield from ask(
                Search(
                    plan.query,
                    hit_limit(self.config, room),
                    lambda pid: branch.owns("p", page_number(pid)),
                    newest=branch.next["p"] - 1,
                )
            )
            if resident:
                read.resident_scores = yield from ask(
                    ScoreTexts(plan.query, [text for _, text, _ in resident])
                )
        read.nodes = (yield from ask(LoadClusters(clusters))) if clusters else {}
        read.members = (
            (yield from ask(ListMembers(list(read.nodes), CLUSTER_MEMBERS_LISTED))) if read.nodes else {}
        )
        listed = [p for members in read.members.values() for p in members]
        matched = best_pages(read.hits, page_limit(room))
        read.pages = yield from ask(LoadPages([*wanted, *matched, *listed]))
        edges = [p for p in adjacent_pages(matched) if p not in read.pages and visible_on(branch, p)]
        if edges:  # passages run on across page edges
            read.pages.update((yield from ask(LoadPages(edges))))
        return read

    def room_for(
        self, branch: PagingState, counter: TokenCounter, *, share: int = 1, call_tokens: int = 0
    ) -> int:
        """Tokens a recall result may take: all the budget leaves beside what nothing may evict
        (the next step makes that room: it pages the rest out, back to the budget rather than the
        low-water mark, and keeps the result), within `recall_max_tokens`, split between recalls
        made at once. Bookmarks yield to the answer: the next step folds them (and those of the
        pages it pushes out) into cluster bookmarks as far as the result needs (`fold_to_fit`),
        so only what they fold into is set aside, with the calling message (`call_tokens`)."""
        budget = branch.budget or (self.config.max_tokens if isinstance(self.config.max_tokens, int) else 0)
        if not branch.budget:
            return self.config.recall_cap_for(budget)
        bookmark_tokens = self.bookmarker.max_tokens + counter.count_message(
            HumanMessage("", id="langmem-paging-room")
        )
        shown = sum(s.tokens for s in branch.shown.values()) + sum(c.tokens for c in branch.clusters.values())
        new_bookmarks = min(
            int(budget * self.config.bookmark_share), bookmark_tokens * (len(branch.pages) + 1)
        )
        folded = min(shown + new_bookmarks, FOLDED_BOOKMARKS * bookmark_tokens)
        room = budget - (branch.protected - shown) - call_tokens - folded - 16
        if self.config.recall_max_tokens is not None:
            room = min(room, self.config.recall_max_tokens)
        return max(64, room // max(1, share))


def holds_text(room: int, pages: int) -> bool:
    """Whether a result of `room` tokens serving `pages` pages shows text of each: a part with
    text (`PART_MIN_TOKENS`) fits each page's share beside its header and note. A sibling recall
    call is pointed to for a page only when it holds it."""
    return room // max(1, pages) - PART_OVERHEAD >= PART_MIN_TOKENS


def resident_turns(view: Sequence[BaseMessage], counter: TokenCounter) -> list[ResidentTurn]:
    """The turns of `view` (what the model sees) a search may rank beside the paged ones: before the
    newest user message, not the library's, with an id; each with the tokens keeping its unit
    (a tool call with its results) costs."""
    newest = max(
        (i for i, m in enumerate(view) if isinstance(m, HumanMessage) and not library_mark(m)),
        default=len(view),
    )
    out: list[ResidentTurn] = []
    for unit in split_units(view[:newest]):
        if any(library_mark(m) for m in unit.messages):
            continue
        tokens = sum(counter.count_message(m) for m in unit.messages)
        out += [(m.id, text, tokens) for m in unit.messages if m.id and (text := message_text(m)).strip()]
    return out


def _outside_pages(resident: Sequence[ResidentTurn], branch: PagingState) -> list[ResidentTurn]:
    """The resident turns outside the resident pages: a formed page is evicted whole whatever it
    holds (keeping one of its turns would not keep it), and the search reaches its turns as hits,
    shown in the result (LoCoMo dev, conversations 0-3, B=8000: turns kept this way were paged
    out by the next step, their tokens counted as used)."""
    paged = {key for page in branch.pages.values() for key in page.ids}
    return [turn for turn in resident if turn[0] not in paged]


def _resolve(
    plan: RecallPlan, branch: PagingState, served: Mapping[str, Served], tool: str
) -> tuple[list[str], list[str], list[str]]:
    """The pages and clusters to read, and notes on what was asked but cannot be (clusters in the
    result of another recall call of the same message; pages served elsewhere are noted once read)."""
    notes: list[str] = []  # most useful first: a small result clips the rest
    plan = _not_served_elsewhere(plan, served, notes, tool)
    unknown = [p for p in plan.page_ids if not branch.owns("p", page_number(p))]
    unknown += [c for c in plan.cluster_ids if not branch.owns("c", cluster_number(c))]
    resident = [p for p in plan.page_ids if p in branch.pages]
    notes += _id_notes(unknown, resident, plan.malformed)
    wanted = [p for p in plan.page_ids if p not in unknown and p not in resident]
    clusters = [c for c in plan.cluster_ids if c not in unknown]
    return wanted, clusters, notes


def _not_served_elsewhere(
    plan: RecallPlan, served: Mapping[str, Served], notes: list[str], tool: str
) -> RecallPlan:
    """`plan` without the ids another recall call of the same message serves; a note points to
    the clusters' call (pages: `_elsewhere_notes`, once their size is known)."""
    elsewhere = [i for i in [*plan.page_ids, *plan.cluster_ids] if i in served]
    if not elsewhere:
        return plan
    clusters = [c for c in plan.cluster_ids if c in served]
    if clusters:
        notes.append(_pointer(clusters, served, tool))
    return replace(
        plan,
        page_ids=[p for p in plan.page_ids if p not in served],
        cluster_ids=[c for c in plan.cluster_ids if c not in served],
    )


def _elsewhere_notes(
    asked: Sequence[str],
    served: Mapping[str, Served],
    pages: Mapping[str, Page],
    counter: TokenCounter,
    tool: str,
) -> list[str]:
    """Notes on the pages another call serves: a pointer to it when its room holds the page, else
    that the page does not fit beside the others (no call shows it, so none is pointed to)."""
    elsewhere = [p for p in dict.fromkeys(asked) if p in served]
    # a page that is not paged out: the serving call's note says so
    held = [p for p in elsewhere if p not in pages or _holds(pages[p], served[p].room, counter)]
    notes = [_pointer(held, served, tool)] if held else []
    lost = [p for p in elsewhere if p not in held]
    if lost:
        notes.append(
            f"{listed_ids(lost)} does not fit the room your {tool} calls made at once share: "
            f"call {tool} with fewer pages at a time."
        )
    return notes


def _holds(page: Page, room: int, counter: TokenCounter) -> bool:
    """Whether a result with `room` tokens for `page` shows it: whole, or a part with text."""
    return counter.count_text(render_page(page)) + 1 <= room - 16 or holds_text(room, 1)


def _pointer(ids: Sequence[str], served: Mapping[str, Served], tool: str) -> str:
    calls = ", ".join(dict.fromkeys(served[i].call for i in ids))
    return f"{listed_ids(ids)}: in the result of your other {tool} call ({calls}), not repeated."


def _id_notes(unknown: list[str], resident: list[str], malformed: list[str]) -> list[str]:
    """Notes on asked ids that are not this branch's, not paged out, or not ids at all."""
    notes = []
    if unknown:
        notes.append(f"No such page or cluster in this conversation: {listed_ids(unknown)}.")
    if resident:
        notes.append(f"Already in your context, not paged out: {listed_ids(resident)}.")
    if malformed:
        notes.append(f"Not page or cluster ids: {listed_ids(malformed, 5)}. Ids look like 'p3' or 'c2'.")
    return notes
