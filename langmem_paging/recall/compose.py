"""The recall result, sized and rendered: what a recall read (`RecallRead`) becomes a `RecallAnswer`.

The asked pages (whole, or the asked part of a long one), the clusters' listings, and as many of
the best search passages as fit the room the others leave, best first, with a second hop (a
follow-up query from the best hits' distinctive terms) when they leave room.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from langchain_core.messages import BaseMessage

from langmem_paging.config import PagingConfig
from langmem_paging.core.blocks import media_tokens
from langmem_paging.core.effects import ask
from langmem_paging.core.records import ClusterNode, Page, page_number
from langmem_paging.core.rendering import render_message
from langmem_paging.core.state import PagingState
from langmem_paging.core.tokens import TokenCounter, message_text
from langmem_paging.index.base import Hit, best_pages
from langmem_paging.recall.feedback import FEEDBACK_HITS, follow_up_query
from langmem_paging.recall.io import RecallFlow, Search
from langmem_paging.recall.passages import Packed, adjacent_pages, pack_hits
from langmem_paging.recall.plan import RecallPlan
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
from langmem_paging.recall.request import RecallAnswer, RecallRequest
from langmem_paging.recall.spec import ClusterItem, Item, PageItem, PassageItem, RecallSpec
from langmem_paging.step.io import LoadPages

__all__ = ["Composer", "RecallRead"]

FIRST_HOP_SCORE = 0.0
"""Hits scoring at least this share of the best hit's score are the first result; the second hop
fills the room they leave before the weaker hits do. At 0 every hit is in the first result, so the
second hop fills only the room left once the question's words match nothing more. LoCoMo dev,
first two conversations, multi-hop evidence coverage at B=2000/4000/8000: no second hop
0.279/0.581/0.698; 0 (hits +-1 to the 40th, then alone) 0.302/0.605/0.698; 0.3, 0.326/0.605/0.651."""
SECOND_HOP_MIN_ROOM = 64
"""Room the first result must leave for a second hop."""


@dataclass
class RecallRead:
    """What a recall read from the index and the store."""

    hits: list[Hit] = field(default_factory=list)
    resident_scores: list[float] = field(default_factory=list)
    nodes: dict[str, ClusterNode] = field(default_factory=dict)
    members: dict[str, list[str]] = field(default_factory=dict)
    pages: dict[str, Page] = field(default_factory=dict)


class Composer:
    """Sizes and renders one recall result (one per call: it keeps the call's line costs)."""

    def __init__(
        self,
        config: PagingConfig,
        plan: RecallPlan,
        branch: PagingState,
        read: RecallRead,
        counter: TokenCounter,
        cap: int,
        request: RecallRequest,
    ) -> None:
        self.config, self.plan, self.branch, self.read = config, plan, branch, read
        self.edits, self.share, self.resident = request.edits, request.share, request.resident
        self.line_tokens: dict[tuple[str, int], int] = {}  # this call's: a message line's tokens
        self.counter, self.cap = counter, cap
        self.kept: list[str] = []

    def answer(self, wanted: list[str], notes: list[str]) -> RecallFlow[RecallAnswer]:
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
            notes.append(f"No such page in this conversation: {listed_ids(missing)}.")
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
        listed = [p for p in self.read.members[cluster_id] if p in pages and visible_on(self.branch, p)]
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

    def _passage_items(self, items: list[Item], part_tokens: int, notes: list[str]) -> RecallFlow[list[Item]]:
        """As many of the best passages as fit the room the pages and clusters left (no fixed
        count), best first, grouped by page, each costed as it renders. The hits scoring within
        `FIRST_HOP_SCORE` of the best go first; when they leave room, a second hop (a follow-up
        query from their distinctive terms) fills it, and the weaker hits fill what is left."""
        hits = self.read.hits
        room = self._passage_room(items, part_tokens, notes)
        visible = self._visible_pages()
        cutoff = hits[0].score * FIRST_HOP_SCORE if hits else 0.0
        strong = [h for h in hits if h.score >= cutoff]
        scores = zip(self.read.resident_scores, self.resident, strict=False)
        packed = self._pack(strong, room, resident=[(score, tokens) for score, (_, _, tokens) in scores])
        self.kept = [self.resident[k][0] for k in packed.resident]
        if strong and room - packed.used >= SECOND_HOP_MIN_ROOM:
            second = yield from self._second_hop(strong, packed.groups)
            _more(packed, self._pack(second, room - packed.used, taken=packed.groups))
        if len(strong) < len(hits) and room > packed.used:
            weaker = [h for h in hits if h.score < cutoff and h.page_id in visible]
            _more(packed, self._pack(weaker, room - packed.used, taken=packed.groups))
        notes += self._nothing_fits(packed, hits)
        return [PassageItem(pid, spans) for pid, spans in packed.groups]

    def _passage_room(self, items: list[Item], part_tokens: int, notes: list[str]) -> int:
        """The room the asked pages, the clusters and the notes leave for passages."""
        asked = RecallSpec(items=list(items), max_tokens=self.cap, part_tokens=part_tokens)
        used = items_tokens(asked, self.read.pages.get, self.read.nodes.get, self.counter)
        return max(0, self.cap - used - (_note_tokens(notes, self.cap, self.counter) + 1 if notes else 0))

    def _nothing_fits(self, packed: Packed, hits: Sequence[Hit]) -> list[str]:
        """The note when there were matches but no passage (nor resident turn) fits."""
        if packed.groups or not hits or self.kept:
            return []
        best = ", ".join(best_pages(hits, 3))
        return [
            f"Matches in {best}, but no passage fits the {self.cap} tokens left for this result: "
            f"{self.config.tool_name}(page_ids=['{best_pages(hits, 1)[0]}'], part=1) reads the best page in parts."
        ]

    def _visible_pages(self) -> dict[str, Page]:
        return {
            pid: page
            for pid, page in self.read.pages.items()
            if visible_on(self.branch, pid) or pid in self.branch.pages
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
    ) -> RecallFlow[list[Hit]]:
        """Hits of a follow-up query drawn from the best first hits' distinctive terms, their
        pages loaded (with their neighbours across page edges)."""
        query = self._follow_up_query(first)
        if not query:
            return []
        shown = {(pid, i) for pid, runs in taken for a, b in runs for i in range(a, b)}
        branch = self.branch
        hits = yield from ask(
            Search(
                query,
                hit_limit(self.config, self.cap),
                lambda pid: branch.owns("p", page_number(pid)),
                newest=branch.next["p"] - 1,
            )
        )
        hits = [h for h in hits if (h.page_id, h.index) not in shown]
        yield from self._load_pages_of(hits)
        return hits

    def _follow_up_query(self, first: Sequence[Hit]) -> str:
        """A follow-up query from the distinctive terms of the best first hits' messages."""
        pages = self.read.pages
        top = [
            message_text(pages[h.page_id].messages[h.index])
            for h in first[:FEEDBACK_HITS]
            if h.page_id in pages and h.index < len(pages[h.page_id].messages)
        ]
        corpus = [message_text(m) for page in self._visible_pages().values() for m in page.messages]
        return follow_up_query(self.plan.query or "", top, corpus)

    def _load_pages_of(self, hits: Sequence[Hit]) -> RecallFlow[None]:
        """Load the best hits' pages not read yet, and their neighbours across page edges."""
        pages = self.read.pages
        needed = [p for p in best_pages(hits, page_limit(self.cap)) if p not in pages]
        edges = [
            p
            for p in adjacent_pages(needed)
            if p not in pages and p not in needed and visible_on(self.branch, p)
        ]
        if needed or edges:
            loaded = yield from ask(LoadPages([*needed, *edges]))
            pages.update({pid: edited_page(page, self.edits) for pid, page in loaded.items()})

    def _accessed(self, labels: list[str], items: list[Item]) -> list[str]:
        """Pages served (their text or a part of it shown), a cluster's members when their text
        was, and asked pages still in the context: a page left out was not accessed."""
        accessed = [label for label in labels if label.startswith("p")]
        for item in items:
            if isinstance(item, ClusterItem) and item.cluster in labels and item.text:
                accessed += item.members
        return accessed + [p for p in self.plan.page_ids if p in self.branch.pages]


def _more(packed: Packed, more: Packed) -> None:
    """`packed` with the passages of a later packing (into the room it left) added."""
    packed.groups, packed.used = more.groups, packed.used + more.used


def edited_page(page: Page, edits: Mapping[str, BaseMessage]) -> Page:
    """`page` with the messages the history holds in another version replaced by that version."""
    changed = {
        m.id: edit for m in page.messages if m.id and (edit := edits.get(m.id)) is not None and edit != m
    }
    if not changed:
        return page
    return replace(page, messages=[changed.get(m.id or "", m) for m in page.messages])


def hit_limit(config: PagingConfig, room: int) -> int:
    """Hits a search reads: as many as the room could show alone (a message line takes ~8 tokens
    or more), so packing is never starved of hits while the room has space."""
    return max(50, 8 * config.search_results, room // 8)


def page_limit(room: int) -> int:
    """Pages a search loads for its hits (best first): as many as the room could show a line of."""
    return max(24, room // 40)


def visible_on(branch: PagingState, page_id: str) -> bool:
    return branch.owns("p", page_number(page_id)) and page_id not in branch.pages


def listed_ids(ids: Sequence[str], limit: int = 20) -> str:
    """Ids for a note, the first `limit` of them and how many more (the model may send thousands)."""
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def _note_tokens(notes: list[str], cap: int, counter: TokenCounter) -> int:
    """Tokens the notes take in a result of `cap` tokens (clipped as `render_recall` clips them)."""
    return counter.count_text(clip_note(" ".join(notes), cap, counter))


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
