"""The recall service: plan -> read -> size -> render, as a flow of requests.

A recall reads only what the running branch may see (its paging state decides), sizes its
result to the room the budget leaves beside what nothing may evict (the next step makes that
room), and renders pages, parts of long pages, search passages and cluster listings within it.
It is a generator of requests (`langmem_paging.thread_io`), so sync and async differ only in
the driver. A store or index failure comes back as an error result asking the model to try
again; nothing the model sends makes it raise.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage

from langmem_paging.bookmarks import Bookmarker
from langmem_paging.config import PagingConfig
from langmem_paging.effects import LoadPages, ask
from langmem_paging.errors import StorageError
from langmem_paging.hooks import PageEvent, PagingHooks
from langmem_paging.messages import library_mark, split_units
from langmem_paging.recall.passages import adjacent_pages, pack_hits
from langmem_paging.recall.plan import RecallPlan, plan_recall
from langmem_paging.recall.render import (
    PART_MIN_TOKENS,
    clip_note,
    member_line,
    page_parts,
    recall_artifact,
    render_message,
    render_page,
    render_passages,
    render_recall_shown,
)
from langmem_paging.recall.spec import ClusterItem, Item, PageItem, PassageItem, RecallSpec
from langmem_paging.records import ClusterNode, Page, cluster_number, page_number
from langmem_paging.search import Hit, best_pages
from langmem_paging.state import PagingState
from langmem_paging.thread_io import ListMembers, LoadClusters, Notify, ScoreTexts, Search, ThreadFlow
from langmem_paging.tokens import TokenCounter, message_text

__all__ = ["RECALL_UNAVAILABLE", "RecallAnswer", "RecallRequest", "RecallService", "resident_turns"]

logger = logging.getLogger("langmem_paging")

CLUSTER_MEMBERS_LISTED = 40
_EMPTY = Page(id="p999999", messages=[], bookmark="", keywords=[], token_count=0, boundary="", created_turn=0)
"""A page with no messages: what a passage header costs."""
RECALL_UNAVAILABLE = (
    "recall failed: the paged-out history is unavailable right now (the page store did not answer). "
    "Try the same recall again in a moment; nothing was lost."
)


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
    served: Mapping[str, str] = field(default_factory=dict)
    """Pages and clusters an earlier recall call of the same message asks for, by the id of that
    call: each is served once, the later calls point to it."""


@dataclass
class RecallAnswer:
    """What a recall returns to the tool."""

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

    def __init__(self, config: PagingConfig, *, bookmarker: Bookmarker, hooks: Sequence[PagingHooks] = ()) -> None:
        self.config, self.bookmarker, self.hooks = config, bookmarker, list(hooks)

    def flow(self, thread_id: str, state: Any, request: RecallRequest, counter: TokenCounter) -> ThreadFlow[RecallAnswer]:
        """Text of the asked pages, clusters and search passages visible on `state`'s branch."""
        branch = PagingState.from_value(state)
        plan = plan_recall(request.page_ids, request.query, request.part)
        wanted, clusters, notes = _resolve(plan, branch, request.served)
        cap = self.room_for(branch, counter, share=request.share, call_tokens=request.call_tokens)
        try:
            read = yield from self._read(plan, branch, wanted, clusters, cap, request.resident)
            read.pages = {pid: _edited(page, request.edits) for pid, page in read.pages.items()}
        except StorageError as error:
            logger.warning("recall on thread %s: %s; the model is told to try again", thread_id, error,
                           exc_info=error)
            return RecallAnswer(RECALL_UNAVAILABLE, {}, [], branch.turn, status="error")
        answer = _Composer(self.config, plan, branch, read, counter, cap, request.share,
                           request.resident).answer(wanted, notes)
        if answer.accessed and self.hooks:
            event = PageEvent(thread_id, list(dict.fromkeys(answer.accessed)), answer.turn)
            yield from ask(Notify(self.hooks, [("recalled", event)]))
        return answer

    def _read(self, plan: RecallPlan, branch: PagingState, wanted: list[str], clusters: list[str],
              room: int, resident: Sequence[tuple[str, str, int]]) -> ThreadFlow[_Read]:
        read = _Read()
        if plan.query is not None:
            # resident pages too: the room the result takes pushes them out at the next step
            read.hits = yield from ask(Search(plan.query, max(50, 8 * self.config.search_results, room // 25),
                                              lambda pid: branch.owns("p", page_number(pid)),
                                              newest=branch.next["p"] - 1))
            if resident:
                read.resident_scores = yield from ask(ScoreTexts(plan.query, [text for _, text, _ in resident]))
        read.nodes = (yield from ask(LoadClusters(clusters))) if clusters else {}
        read.members = (yield from ask(ListMembers(list(read.nodes), CLUSTER_MEMBERS_LISTED))) if read.nodes else {}
        listed = [p for members in read.members.values() for p in members]
        matched = best_pages(read.hits, max(24, room // 100))
        read.pages = yield from ask(LoadPages([*wanted, *matched, *listed]))
        edges = [p for p in adjacent_pages(matched) if p not in read.pages and _visible(branch, p)]
        if edges:  # passages run on across page edges
            read.pages.update((yield from ask(LoadPages(edges))))
        return read

    def room_for(self, branch: PagingState, counter: TokenCounter, *, share: int = 1, call_tokens: int = 0) -> int:
        """Tokens a recall result may take: all the budget leaves beside what nothing may evict
        (the next step makes that room: it pages the rest out, back to the budget rather than the
        low-water mark, and keeps the result), within `recall_max_tokens`, split between recalls
        made at once. Set aside: the calling message (`call_tokens`) and the bookmarks of the
        resident pages the next step may push out (within the bookmarks' share)."""
        budget = branch.budget or (self.config.max_tokens if isinstance(self.config.max_tokens, int) else 0)
        if not branch.budget:
            return self.config.recall_cap_for(budget)
        bookmark_text = int(getattr(self.bookmarker, "max_tokens", 24) or 24)
        bookmark_tokens = bookmark_text + counter.count_message(HumanMessage("", id="langmem-paging-room"))
        new_bookmarks = min(int(budget * self.config.bookmark_share), bookmark_tokens * (len(branch.pages) + 1))
        room = budget - branch.protected - call_tokens - new_bookmarks - 16
        if self.config.recall_max_tokens is not None:
            room = min(room, self.config.recall_max_tokens)
        return max(64, room // max(1, share))


def resident_turns(view: Sequence[BaseMessage], counter: TokenCounter) -> list[tuple[str, str, int]]:
    """The turns of `view` (what the model sees) a search may rank beside the paged ones: before the
    newest user message, not the library's, with an id; each with the tokens keeping its unit
    (a tool call with its results) costs."""
    newest = max((i for i, m in enumerate(view) if isinstance(m, HumanMessage) and not library_mark(m)),
                 default=len(view))
    out: list[tuple[str, str, int]] = []
    for unit in split_units(view[:newest]):
        if any(library_mark(m) for m in unit.messages):
            continue
        tokens = sum(counter.count_message(m) for m in unit.messages)
        out += [(m.id, text, tokens) for m in unit.messages if m.id and (text := message_text(m)).strip()]
    return out


def _resolve(plan: RecallPlan, branch: PagingState,
             served: Mapping[str, str]) -> tuple[list[str], list[str], list[str]]:
    """The pages and clusters to read, and notes on what was asked but cannot be (or is in the
    result of another recall call of the same message)."""
    notes: list[str] = []  # most useful first: a small result clips the rest
    plan = _not_served_elsewhere(plan, served, notes)
    unknown = [p for p in plan.page_ids if not branch.owns("p", page_number(p))]
    unknown += [c for c in plan.cluster_ids if not branch.owns("c", cluster_number(c))]
    resident = [p for p in plan.page_ids if p in branch.pages]
    notes += _id_notes(unknown, resident, plan.malformed)
    wanted = [p for p in plan.page_ids if p not in unknown and p not in resident]
    clusters = [c for c in plan.cluster_ids if c not in unknown]
    return wanted, clusters, notes


class _Composer:
    """Sizes and renders one recall result."""

    def __init__(self, config: PagingConfig, plan: RecallPlan, branch: PagingState, read: _Read,
                 counter: TokenCounter, cap: int, share: int = 1,
                 resident: Sequence[tuple[str, str, int]] = ()) -> None:
        self.config, self.plan, self.branch, self.read = config, plan, branch, read
        self.counter, self.cap, self.share, self.resident = counter, cap, share, resident
        self.kept: list[str] = []

    def answer(self, wanted: list[str], notes: list[str]) -> RecallAnswer:
        pages = self.read.pages
        found = [p for p in wanted if p in pages]
        notes += self._missing_notes(wanted)
        items, part_tokens = self._page_items(found, notes)
        items += [self._cluster_item(cid, node) for cid, node in self.read.nodes.items()]
        if self.read.hits or self.read.resident_scores:
            items += self._passage_items(items, notes)
        if notes and not items and not all(n.endswith("not repeated.") for n in notes):
            shown = [*self.branch.clusters, *self.branch.shown]
            notes.append(f"Bookmarks in your context: {', '.join(shown) or 'none yet (nothing paged out)'}.")
        spec = RecallSpec(items=items, max_tokens=self.cap, part_tokens=part_tokens, note=" ".join(notes),
                          encoding=self.counter.encoding.name, tool=self.config.tool_name)
        content, labels = render_recall_shown(spec, pages.get, self.read.nodes.get, self.counter)
        recalled = list(dict.fromkeys(label for label in labels if label.startswith("p")))
        return RecallAnswer(content, recall_artifact(spec, recalled), self._accessed(found, items, labels),
                            self.branch.turn, kept=self.kept)

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
        long = [p for p in found if self.plan.part is not None or counter.count_text(render_page(pages[p])) > cap - 16]
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
                notes.append(f"{page_id} does not fit the {cap} tokens this recall gets beside the others "
                             f"made with it: call {self.config.tool_name} with fewer pages at a time.")
                continue
            n = len(page_parts(pages[page_id], part_tokens, counter))
            part = min(self.plan.part or 1, n)
            items.append(PageItem(page_id, part))
            follow = f"; {self.config.tool_name}(page_ids=['{page_id}'], part={part + 1}) for more" if part < n else ""
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

    def _passage_items(self, items: list[Item], notes: list[str]) -> list[Item]:
        """As many of the best passages as fit the room the pages left (no fixed count), best first,
        grouped by page; checked against their rendering, the last packed give way if needed."""
        pages, counter, hits = self.read.pages, self.counter, self.read.hits
        used = sum(counter.count_text(render_page(pages[i.page])) for i in items
                   if isinstance(i, PageItem) and i.part is None)
        room = max(0, self.cap - used - _note_tokens(notes, self.cap, counter) - 8)
        visible = {pid: page for pid, page in pages.items() if _visible(self.branch, pid) or pid in self.branch.pages}
        packed = pack_hits([h for h in hits if h.page_id in visible], visible,
                           line_cost=lambda m: counter.count_text(render_message(m)) + 1,
                           header_cost=counter.count_text(render_passages(_EMPTY, [(0, 0)])) + 6,
                           room=room, neighbours=self.config.passage_neighbours,
                           resident=[(score, tokens) for score, (_, _, tokens)
                                     in zip(self.read.resident_scores, self.resident, strict=False)])
        self.kept = [self.resident[k][0] for k in packed.resident]
        room -= sum(self.resident[k][2] for k in packed.resident)
        out = [PassageItem(pid, spans) for pid, spans in packed.groups]
        while out and sum(counter.count_text(render_passages(pages[i.page], i.spans)) + 1 for i in out) > room:
            out.pop()  # the estimate fell short: the page packed last gives way
        if not out and hits and not self.kept:
            best = ", ".join(best_pages(hits, 3))
            notes.append(f"Matches in {best}, but no passage fits the {self.cap} tokens left for this result: "
                         f"{self.config.tool_name}(page_ids=['{best_pages(hits, 1)[0]}'], part=1) reads the best page in parts.")
        return list(out)

    def _accessed(self, found: list[str], items: list[Item], labels: list[str]) -> list[str]:
        """A recall is an access, whether or not all of the text fit."""
        accessed = [*found, *(label for label in labels if label.startswith("p") and label not in found)]
        for item in items:
            if isinstance(item, ClusterItem) and item.cluster in labels and item.text:
                accessed += item.members
        return accessed + [p for p in self.plan.page_ids if p in self.branch.pages]


def _edited(page: Page, edits: Mapping[str, BaseMessage]) -> Page:
    """`page` with the messages the history holds in another version replaced by that version."""
    changed = {m.id: edit for m in page.messages if m.id and (edit := edits.get(m.id)) is not None and edit != m}
    if not changed:
        return page
    return replace(page, messages=[changed.get(m.id or "", m) for m in page.messages])


def _not_served_elsewhere(plan: RecallPlan, served: Mapping[str, str], notes: list[str]) -> RecallPlan:
    """`plan` without the ids another recall call of the same message serves (a note points there)."""
    elsewhere = [i for i in [*plan.page_ids, *plan.cluster_ids] if i in served]
    if not elsewhere:
        return plan
    calls = ", ".join(dict.fromkeys(served[i] for i in elsewhere))
    notes.append(f"{_listed(elsewhere)}: in the result of your other recall call ({calls}), not repeated.")
    return replace(plan, page_ids=[p for p in plan.page_ids if p not in served],
                   cluster_ids=[c for c in plan.cluster_ids if c not in served])


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
