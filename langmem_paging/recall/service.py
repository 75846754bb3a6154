"""The recall service: plan -> read -> size -> render, as a flow of requests.

A recall reads only what the running branch may see (its paging state decides), sizes its
result to the room the budget leaves beside what nothing may evict (the next step makes that
room), and renders pages, parts of long pages, search passages and cluster listings within it.
It is a generator of requests (`langmem_paging.storage.thread_io`), so sync and async differ only in
the driver. A store or index failure comes back as an error result asking the model to try
again; nothing the model sends makes it raise.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from langmem_paging.config import PagingConfig
from langmem_paging.core.blocks import Block, media_tokens
from langmem_paging.core.effects import ask
from langmem_paging.core.errors import StorageError
from langmem_paging.core.hooks import PageEvent, PagingHooks
from langmem_paging.core.messages import library_mark, split_units
from langmem_paging.core.records import ClusterNode, Page, cluster_number, page_number
from langmem_paging.core.rendering import render_message
from langmem_paging.core.state import PagingState
from langmem_paging.core.tokens import TokenCounter, message_text
from langmem_paging.index.base import Hit, best_pages
from langmem_paging.recall.feedback import FEEDBACK_HITS, follow_up_query
from langmem_paging.recall.passages import Packed, adjacent_pages, pack_hits
from langmem_paging.recall.plan import RecallPlan, plan_recall
from langmem_paging.recall.render import (
    PART_MIN_TOKENS,
    clip_note,
    items_tokens,
    member_line,
    page_parts,
    passages_cost,
    recall_artifact,
    render_page,
    render_recall_shown,
    with_media,
)
from langmem_paging.recall.spec import ClusterItem, Item, PageItem, PassageItem, RecallSpec
from langmem_paging.step.io import LoadPages
from langmem_paging.storage.thread_io import ListMembers, LoadClusters, Notify, ScoreTexts, Search, ThreadFlow
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
FIRST_HOP_SCORE = 0.0
"""Hits scoring at least this share of the best hit's score are the first result; the second hop
fills the room they leave before the weaker hits do. At 0 every hit is in the first result, so the
second hop fills only the room left once the question's words match nothing more. LoCoMo dev,
first two conversations, multi-hop evidence coverage at B=2000/4000/8000: no second hop
0.279/0.581/0.698; 0 (hits +-1 to the 40th, then alone) 0.302/0.605/0.698; 0.3, 0.326/0.605/0.651."""
SECOND_HOP_MIN_ROOM = 64
"""Room the first result must leave for a second hop."""
PART_OVERHEAD = 80
"""Tokens a page's part takes beside its text: its header and its note ("p3 is long: part 1 of
12; recall(page_ids=['p3'], part=2) for more.")."""
_EMPTY = Page(id="p999999", messages=[], bookmark="", keywords=[], token_count=0, boundary="", created_turn=0)
"""A page with no messages: what a passage header costs."""
RECALL_UNAVAILABLE = (
    "{tool} failed: the paged-out history is unavailable right now (the page store did not answer). "
    "Try the same {tool} call again in a moment; nothing was lost."
)
"""The error result of a recall the store did not answer (``.format(tool=tool_name)``)."""


@dataclass(frozen=True)
class Served:
    """Where a page or cluster asked by several recall calls of one message is served."""

    call: str
    """The tool call id of the recall call serving it."""
    room: int
    """Tokens that call's result has for each thing it serves: a page is pointed to only when
    it fits (whole, or a part with text)."""


@dataclass
class RecallRequest:
    """One call of the recall tool, as the model made it."""

    page_ids: Any = None
    """Page or cluster ids, in whatever shape the model sent them."""
    query: Any = None
    """Search text."""
    part: Any = None
    """Which part of a long page."""
    share: int = 1
    """How many recalls the model made at once (each gets that share of the room)."""
    call_tokens: int = 0
    """Tokens of the message that made the call (the next step keeps it)."""
    edits: Mapping[str, BaseMessage] = field(default_factory=dict)
    """View mode: the history's messages by id. A paged message the app edited since it was paged
    is recalled as the history now holds it (the edited text wins)."""
    resident: Sequence[tuple[str, str, int]] = ()
    """Turns still in the context as ``(key, text, tokens)`` (tokens: of what keeping it keeps, its
    tool group included): a search ranks them beside the paged turns, and keeps those that rank."""
    served: Mapping[str, Served] = field(default_factory=dict)
    """Pages and clusters another recall call of the same message serves (the first asking for
    them): each is served once, and the others point to that call when its room holds the page."""


@dataclass
class RecallAnswer:
    """What a recall returns to the tool."""

    content: str | list[str | Block]
    """The tool message content: text, or text and the original image/file blocks it shows."""
    artifact: dict[str, Any]
    """Kept on the ToolMessage (not sent to the model) to shrink and re-expand it."""
    accessed: list[str]
    """Page ids to count one access each."""
    turn: int
    """The thread's user turn."""
    status: str = "success"
    """The tool message status: ``"error"`` when the page store could not be read."""
    kept: list[str] = field(default_factory=list)
    """Keys of resident turns the search ranked: the next step keeps them in the context."""


@dataclass
class _Read:
    """What a recall read from the index and the store."""

    hits: list[Hit] = field(default_factory=list)
    resident_scores: list[float] = field(default_factory=list)
    nodes: dict[str, ClusterNode] = field(default_factory=dict)
    members: dict[str, list[str]] = field(default_factory=dict)
    pages: dict[str, Page] = field(default_factory=dict)


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
        self, thread_id: str, state: Any, request: RecallRequest, counter: TokenCounter
    ) -> ThreadFlow[RecallAnswer]:
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
            loaded = [*wanted, *(p for p in elsewhere if _visible(branch, p))]
            read = yield from self._read(plan, branch, loaded, clusters, cap, request.resident)
            read.pages = {pid: _edited(page, request.edits) for pid, page in read.pages.items()}
            notes[:0] = _elsewhere_notes(elsewhere, request.served, read.pages, counter, tool)
        except StorageError as error:
            logger.warning(
                "recall on thread %s: %s; the model is told to try again", thread_id, error, exc_info=error
            )
            return RecallAnswer(unavailable, {}, [], branch.turn, status="error")
        try:
            answer = yield from _Composer(
                self.config, plan, branch, read, counter, cap, request.share, request.resident, request.edits
            ).answer(wanted, notes)
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
        resident: Sequence[tuple[str, str, int]],
    ) -> ThreadFlow[_Read]:
        read = _Read()
        if plan.query is not None:
            # resident pages too: the room the result takes pushes them out at the next step
            read.hits = yield from ask(
                Search(
                    plan.query,
                    _hit_limit(self.config, room),
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
        matched = best_pages(read.hits, _page_limit(room))
        read.pages = yield from ask(LoadPages([*wanted, *matched, *listed]))
        edges = [p for p in adjacent_pages(matched) if p not in read.pages and _visible(branch, p)]
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
        bookmark_text = int(getattr(self.bookmarker, "max_tokens", 24) or 24)
        bookmark_tokens = bookmark_text + counter.count_message(HumanMessage("", id="langmem-paging-room"))
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


def _hit_limit(config: PagingConfig, room: int) -> int:
    """Hits a search reads: as many as the room could show alone (a message line takes ~8 tokens
    or more), so packing is never starved of hits while the room has space."""
    return max(50, 8 * config.search_results, room // 8)


def _page_limit(room: int) -> int:
    """Pages a search loads for its hits (best first): as many as the room could show a line of."""
    return max(24, room // 40)


def resident_turns(view: Sequence[BaseMessage], counter: TokenCounter) -> list[tuple[str, str, int]]:
    """The turns of `view` (what the model sees) a search may rank beside the paged ones: before the
    newest user message, not the library's, with an id; each with the tokens keeping its unit
    (a tool call with its results) costs."""
    newest = max(
        (i for i, m in enumerate(view) if isinstance(m, HumanMessage) and not library_mark(m)),
        default=len(view),
    )
    out: list[tuple[str, str, int]] = []
    for unit in split_units(view[:newest]):
        if any(library_mark(m) for m in unit.messages):
            continue
        tokens = sum(counter.count_message(m) for m in unit.messages)
        out += [(m.id, text, tokens) for m in unit.messages if m.id and (text := message_text(m)).strip()]
    return out


def _outside_pages(
    resident: Sequence[tuple[str, str, int]], branch: PagingState
) -> list[tuple[str, str, int]]:
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


class _Composer:
    """Sizes and renders one recall result."""

    def __init__(
        self,
        config: PagingConfig,
        plan: RecallPlan,
        branch: PagingState,
        read: _Read,
        counter: TokenCounter,
        cap: int,
        share: int = 1,
        resident: Sequence[tuple[str, str, int]] = (),
        edits: Mapping[str, BaseMessage] | None = None,
    ) -> None:
        self.config, self.plan, self.branch, self.read = config, plan, branch, read
        self.edits = edits or {}
        self.line_tokens: dict[tuple[str, int], int] = {}  # this call's: a message line's tokens
        self.counter, self.cap, self.share, self.resident = counter, cap, share, resident
        self.kept: list[str] = []

    def answer(self, wanted: list[str], notes: list[str]) -> ThreadFlow[RecallAnswer]:
        pages = self.read.pages
        found = [p for p in wanted if p in pages]
        notes += self._missing_notes(wanted)
        items, part_tokens = self._page_items(found, notes)
        items += [self._cluster_item(cid, node) for cid, node in self.read.nodes.items()]
        if self.read.hits or self.read.resident_scores:
            items += yield from self._passage_items(items, part_tokens, notes)
        if notes and not items and not all(n.endswith("not repeated.") for n in notes):
            shown = [*self.branch.clusters, *self.branch.shown]
            notes.append(f"Bookmarks in your context: {', '.join(shown) or 'none yet (nothing paged out)'}.")
        spec = RecallSpec(
            items=items,
            max_tokens=self.cap,
            part_tokens=part_tokens,
            note=" ".join(notes),
            encoding=self.counter.encoding.name,
            tool=self.config.tool_name,
        )
        content, labels = render_recall_shown(spec, pages.get, self.read.nodes.get, self.counter)
        recalled = list(dict.fromkeys(label for label in labels if label.startswith("p")))
        return RecallAnswer(
            with_media(content, recalled, pages.get),
            recall_artifact(spec, recalled),
            self._accessed(labels, items),
            self.branch.turn,
            kept=self.kept,
        )

    def _missing_notes(self, wanted: list[str]) -> list[str]:
        notes = []
        missing = [p for p in wanted if p not in self.read.pages]
        if missing:
            notes.append(f"No such page in this conversation: {_listed(missing)}.")
        if self.plan.query is not None and not self.read.hits:
            notes.append(f"Nothing paged out matches the query {_clip(self.plan.query)!r}.")
        plan = self.plan
        if not (plan.page_ids or plan.cluster_ids or plan.query or plan.malformed):
            notes.append("Pass `page_ids` (the pN or cN of a bookmark such as [p3:...]) or a `query`.")
        return notes

    def _page_items(self, found: list[str], notes: list[str]) -> tuple[list[Item], int]:
        """Whole pages, or the asked part of those too long for the result (a part leaves room
        for the notes, its own included: "p3 is long: part 1 of 12; ...")."""
        pages, counter, cap = self.read.pages, self.counter, self.cap
        long = [
            p
            for p in found
            if self.plan.part is not None or counter.count_text(render_page(pages[p])) > cap - 16
        ]
        part_tokens = cap - _note_tokens(notes, cap, counter) - 28 * len(long) - 8
        shared = self.share > 1 or len(long) > 1
        crowded = shared and part_tokens < PART_MIN_TOKENS  # parts this small would hold a few words
        part_tokens = max(PART_MIN_TOKENS if shared else 32, part_tokens)
        items: list[Item] = []
        for page_id in found:
            if page_id not in long:
                items.append(PageItem(page_id))
                continue
            if crowded:
                items.append(PageItem(page_id, 1))
                notes.append(
                    f"{page_id} does not fit the {cap} tokens this recall gets beside the others "
                    f"made with it: call {self.config.tool_name} with fewer pages at a time."
                )
                continue
            n = len(page_parts(pages[page_id], part_tokens, counter))
            part = min(self.plan.part or 1, n)
            items.append(PageItem(page_id, part))
            follow = (
                f"; {self.config.tool_name}(page_ids=['{page_id}'], part={part + 1}) for more"
                if part < n
                else ""
            )
            notes.append(f"{page_id} is long: part {part} of {n}{follow}.")
        return items, part_tokens

    def _cluster_item(self, cluster_id: str, node: ClusterNode) -> ClusterItem:
        """A cluster's visible members; their text when all of them fit half the room."""
        pages, counter = self.read.pages, self.counter
        listed = [p for p in self.read.members[cluster_id] if p in pages and _visible(self.branch, p)]
        fits = sum(pages[p].token_count for p in listed) <= self.cap // 2 and len(listed) == node.size
        if not fits:  # a listing longer than the room is cut, saying how many more there are
            room, kept = self.cap // 2, []
            for page_id in listed:
                room -= counter.count_text(member_line(pages[page_id])) + 1
                if room < 0:
                    break
                kept.append(page_id)
            listed = kept
        return ClusterItem(cluster_id, listed, fits, node.size - len(listed))

    def _passage_items(self, items: list[Item], part_tokens: int, notes: list[str]) -> ThreadFlow[list[Item]]:
        """As many of the best passages as fit the room the pages and clusters left (no fixed
        count), best first, grouped by page, each costed as it renders. The hits scoring within
        `FIRST_HOP_SCORE` of the best go first; when they leave room, a second hop (a follow-up
        query from their distinctive terms) fills it, and the weaker hits fill what is left."""
        pages, counter, hits = self.read.pages, self.counter, self.read.hits
        asked = RecallSpec(items=list(items), max_tokens=self.cap, part_tokens=part_tokens)
        used = items_tokens(asked, pages.get, self.read.nodes.get, counter)
        room = max(0, self.cap - used - (_note_tokens(notes, self.cap, counter) + 1 if notes else 0))
        visible = self._visible_pages()
        cutoff = hits[0].score * FIRST_HOP_SCORE if hits else 0.0
        strong = [h for h in hits if h.score >= cutoff]
        packed = self._pack(
            strong,
            room,
            resident=[
                (score, tokens)
                for score, (_, _, tokens) in zip(self.read.resident_scores, self.resident, strict=False)
            ],
        )
        self.kept = [self.resident[k][0] for k in packed.resident]
        if strong and room - packed.used >= SECOND_HOP_MIN_ROOM:
            second = yield from self._second_hop(strong, packed.groups)
            more = self._pack(second, room - packed.used, taken=packed.groups)
            packed.groups, packed.used = more.groups, packed.used + more.used
        if len(strong) < len(hits) and room > packed.used:
            rest = self._pack(
                [h for h in hits if h.score < cutoff and h.page_id in visible],
                room - packed.used,
                taken=packed.groups,
            )
            packed.groups, packed.used = rest.groups, packed.used + rest.used
        out = [PassageItem(pid, spans) for pid, spans in packed.groups]
        if not out and hits and not self.kept:
            best = ", ".join(best_pages(hits, 3))
            notes.append(
                f"Matches in {best}, but no passage fits the {self.cap} tokens left for this result: "
                f"{self.config.tool_name}(page_ids=['{best_pages(hits, 1)[0]}'], part=1) reads the best page in parts."
            )
        return list(out)

    def _visible_pages(self) -> dict[str, Page]:
        return {
            pid: page
            for pid, page in self.read.pages.items()
            if _visible(self.branch, pid) or pid in self.branch.pages
        }

    def _pack(
        self,
        hits: Sequence[Hit],
        room: int,
        *,
        resident: Sequence[tuple[float, int]] = (),
        taken: Sequence[tuple[str, list[tuple[int, int]]]] = (),
    ) -> Packed:
        visible, counter, lines = self._visible_pages(), self.counter, self.line_tokens

        def cost(page: Page, runs: list[tuple[int, int]]) -> int:
            def line(i: int) -> int:
                key = (page.id, i)
                if key not in lines:
                    message = page.messages[i]  # its line, and the blocks it brings (`with_media`)
                    lines[key] = counter.count_text(render_message(message) + "\n") + media_tokens(
                        message.content, counter.count_text
                    )
                return lines[key]

            return passages_cost(page, runs, counter, line)

        return pack_hits(
            [h for h in hits if h.page_id in visible],
            visible,
            page_cost=cost,
            room=room,
            neighbours=self.config.passage_neighbours,
            resident=resident,
            taken=dict(taken),
        )

    def _second_hop(
        self, first: Sequence[Hit], taken: Sequence[tuple[str, list[tuple[int, int]]]]
    ) -> ThreadFlow[list[Hit]]:
        """Hits of a follow-up query drawn from the best first hits' distinctive terms, their
        pages loaded (with their neighbours across page edges)."""
        pages, branch = self.read.pages, self.branch
        top = [
            message_text(pages[h.page_id].messages[h.index])
            for h in first[:FEEDBACK_HITS]
            if h.page_id in pages and h.index < len(pages[h.page_id].messages)
        ]
        corpus = [message_text(m) for page in self._visible_pages().values() for m in page.messages]
        query = follow_up_query(self.plan.query or "", top, corpus)
        if not query:
            return []
        shown = {(pid, i) for pid, runs in taken for a, b in runs for i in range(a, b)}
        hits = yield from ask(
            Search(
                query,
                _hit_limit(self.config, self.cap),
                lambda pid: branch.owns("p", page_number(pid)),
                newest=branch.next["p"] - 1,
            )
        )
        hits = [h for h in hits if (h.page_id, h.index) not in shown]
        needed = [p for p in best_pages(hits, _page_limit(self.cap)) if p not in pages]
        edges = [
            p for p in adjacent_pages(needed) if p not in pages and p not in needed and _visible(branch, p)
        ]
        if needed or edges:
            loaded = yield from ask(LoadPages([*needed, *edges]))
            pages.update({pid: _edited(page, self.edits) for pid, page in loaded.items()})
        return hits

    def _accessed(self, labels: list[str], items: list[Item]) -> list[str]:
        """Pages served (their text or a part of it shown), a cluster's members when their text
        was, and asked pages still in the context: a page left out was not accessed."""
        accessed = [label for label in labels if label.startswith("p")]
        for item in items:
            if isinstance(item, ClusterItem) and item.cluster in labels and item.text:
                accessed += item.members
        return accessed + [p for p in self.plan.page_ids if p in self.branch.pages]


def _edited(page: Page, edits: Mapping[str, BaseMessage]) -> Page:
    """`page` with the messages the history holds in another version replaced by that version."""
    changed = {
        m.id: edit for m in page.messages if m.id and (edit := edits.get(m.id)) is not None and edit != m
    }
    if not changed:
        return page
    return replace(page, messages=[changed.get(m.id or "", m) for m in page.messages])


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
            f"{_listed(lost)} does not fit the room your {tool} calls made at once share: "
            f"call {tool} with fewer pages at a time."
        )
    return notes


def _holds(page: Page, room: int, counter: TokenCounter) -> bool:
    """Whether a result with `room` tokens for `page` shows it: whole, or a part with text."""
    return counter.count_text(render_page(page)) + 1 <= room - 16 or holds_text(room, 1)


def _pointer(ids: Sequence[str], served: Mapping[str, Served], tool: str) -> str:
    calls = ", ".join(dict.fromkeys(served[i].call for i in ids))
    return f"{_listed(ids)}: in the result of your other {tool} call ({calls}), not repeated."


def _id_notes(unknown: list[str], resident: list[str], malformed: list[str]) -> list[str]:
    """Notes on asked ids that are not this branch's, not paged out, or not ids at all."""
    notes = []
    if unknown:
        notes.append(f"No such page or cluster in this conversation: {_listed(unknown)}.")
    if resident:
        notes.append(f"Already in your context, not paged out: {_listed(resident)}.")
    if malformed:
        notes.append(f"Not page or cluster ids: {_listed(malformed, 5)}. Ids look like 'p3' or 'c2'.")
    return notes


def _visible(branch: PagingState, page_id: str) -> bool:
    return branch.owns("p", page_number(page_id)) and page_id not in branch.pages


def _listed(ids: Sequence[str], limit: int = 20) -> str:
    """Ids for a note, the first `limit` of them and how many more (the model may send thousands)."""
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def _note_tokens(notes: list[str], cap: int, counter: TokenCounter) -> int:
    """Tokens the notes take in a result of `cap` tokens (clipped as `render_recall` clips them)."""
    return counter.count_text(clip_note(" ".join(notes), cap, counter))


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
