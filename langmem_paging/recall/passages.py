"""Passages: the best-matching messages of paged-out pages, with their neighbours, as many as fit.

A search hit is one message of a page. Hits are taken best first; each brings its message and
`neighbours` messages on each side, crossing into the page before or after where the
conversation runs on across the page edge. Only the messages not chosen yet cost room, so
overlapping windows merge as they are packed; a window too long for what is left shrinks
(one neighbour, then the hit alone) rather than being skipped, and packing goes on with the next
hits until nothing more fits: there is no fixed number of passages. Turns still in the context
rank beside the paged ones: one that ranks is kept where it is (it costs its own tokens, and the
next step does not page it out to make room), so a recall never pushes out a resident match.
The result is grouped by page, pages in the order of their best hit, each page's messages as
runs in order.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from langmem_paging.records import Page
    >>> def page(pid, order, n):
    ...     return Page(id=pid, messages=[HumanMessage(f"{pid} m{i}", id=f"{pid}-{i}") for i in range(n)],
    ...                 bookmark="", keywords=[], token_count=n, boundary="fixed_4", created_turn=1, order=order)
    >>> pages = {"p1": page("p1", 0, 4), "p2": page("p2", 4, 4)}
    >>> hits = [Hit("p2", 0, 3.0), Hit("p1", 1, 1.0)]
    >>> pack_hits(hits, pages, line_cost=lambda m: 1, header_cost=1, room=100, neighbours=1).groups
    [('p2', [(0, 2)]), ('p1', [(0, 4)])]
    >>> pack_hits(hits, pages, line_cost=lambda m: 1, header_cost=1, room=6, neighbours=1).groups
    [('p2', [(0, 1)])]
    >>> packed = pack_hits(hits, pages, line_cost=lambda m: 1, header_cost=1, room=6, neighbours=1,
    ...                    resident=[(2.0, 5), (0.5, 1)])
    >>> packed.groups, packed.resident
    ([('p2', [(0, 1)])], [1])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage

from langmem_paging.records import Page, page_number
from langmem_paging.search import Hit

__all__ = ["Packed", "adjacent_pages", "pack_hits"]

Position = tuple[str, int]
GAP_COST = 2
"""Tokens of the ``...`` line between two runs of one page."""


def adjacent_pages(page_ids: Sequence[str]) -> list[str]:
    """Pages whose messages may neighbour the given pages' (the numbers just before and after):
    load them too, so passages can cross page edges."""
    out: list[str] = []
    for page_id in page_ids:
        n = page_number(page_id)
        for m in (n - 1, n + 1):
            if m > 0 and f"p{m}" not in page_ids and f"p{m}" not in out:
                out.append(f"p{m}")
    return out


class _Conversation:
    """Message positions across loaded pages, with the page edges the conversation runs across."""

    def __init__(self, pages: Mapping[str, Page]) -> None:
        self.pages = pages
        spans = {pid: (p.order, p.order + len(p.messages)) for pid, p in pages.items()
                 if p.kind == "page" and p.messages}
        starts = _unique({start: pid for pid, (start, _) in spans.items()}, [s for s, _ in spans.values()])
        ends = _unique({end: pid for pid, (_, end) in spans.items()}, [e for _, e in spans.values()])
        self.after = {pid: starts.get(end) for pid, (_, end) in spans.items()}
        self.before = {pid: ends.get(start) for pid, (start, _) in spans.items()}

    def window(self, hit: Position, width: int) -> list[Position]:
        """The hit and up to `width` messages on each side, in conversation order."""
        back, pos = [], hit
        for _ in range(width):
            prev = self._step(pos, -1)
            if prev is None:
                break
            back.append(prev)
            pos = prev
        ahead, pos = [], hit
        for _ in range(width):
            nxt = self._step(pos, 1)
            if nxt is None:
                break
            ahead.append(nxt)
            pos = nxt
        return [*reversed(back), hit, *ahead]

    def _step(self, position: Position, direction: int) -> Position | None:
        page_id, index = position
        size = len(self.pages[page_id].messages)
        if 0 <= index + direction < size:
            return page_id, index + direction
        other = (self.after if direction > 0 else self.before).get(page_id)
        if other is None or other not in self.pages:
            return None
        return (other, 0) if direction > 0 else (other, len(self.pages[other].messages) - 1)


@dataclass
class Packed:
    """What a search result shows and keeps."""

    groups: list[tuple[str, list[tuple[int, int]]]] = field(default_factory=list)
    """Pages in the order of their best hit, each with its chosen messages as ``[start, stop)`` runs."""
    resident: list[int] = field(default_factory=list)
    """Indexes of the resident candidates that ranked and fit: kept in the context."""


def pack_hits(
    hits: Sequence[Hit],
    pages: Mapping[str, Page],
    *,
    line_cost: Callable[[BaseMessage], int],
    header_cost: int,
    room: int,
    neighbours: int,
    resident: Sequence[tuple[float, int]] = (),
) -> Packed:
    """The hits' windows that fit in `room` tokens, best first, and the resident candidates
    (``(score, tokens)``, on the hits' scale) that rank among them and fit.

    `line_cost` is a message's rendered line with its newline; `header_cost` a page header's; a
    gap marker is counted for every run (an estimate the caller checks against the rendering)."""
    conversation = _Conversation(pages)
    chosen: dict[str, set[int]] = {}
    packed = Packed()
    used = 0
    ranked: list[tuple[float, int, Hit | int]] = [(h.score, 0, h) for h in hits]
    ranked += [(score, 1, k) for k, (score, _) in enumerate(resident) if score > 0]
    for _, _, item in sorted(ranked, key=lambda r: (-r[0], r[1])):
        if isinstance(item, int):
            if used + resident[item][1] <= room:
                packed.resident.append(item)
                used += resident[item][1]
            continue
        used += _pack_hit(item, pages, conversation, chosen, line_cost, header_cost, room - used, neighbours)
    packed.groups = [(pid, _runs(sorted(indexes))) for pid, indexes in chosen.items()]
    return packed


def _pack_hit(hit: Hit, pages: Mapping[str, Page], conversation: _Conversation, chosen: dict[str, set[int]],
              line_cost: Callable[[BaseMessage], int], header_cost: int, room: int, neighbours: int) -> int:
    """Add the hit's widest window that fits `room` (new messages only); returns the tokens used."""
    if hit.page_id not in pages or not 0 <= hit.index < len(pages[hit.page_id].messages):
        return 0
    for width in dict.fromkeys((neighbours, min(1, neighbours), 0)):
        new = [p for p in conversation.window((hit.page_id, hit.index), width) if p[1] not in chosen.get(p[0], ())]
        if not new:
            return 0
        fresh = set(new)
        cost = sum(line_cost(pages[pid].messages[i]) for pid, i in new)
        cost += GAP_COST * sum(1 for pid, i in new  # a run starts: maybe a "..." before it
                               if i - 1 not in chosen.get(pid, ()) and (pid, i - 1) not in fresh)
        cost += header_cost * len({pid for pid, _ in new if pid not in chosen})
        if cost <= room:
            chosen.setdefault(hit.page_id, set())  # pages in the order of their best hit
            for pid, i in new:
                chosen.setdefault(pid, set()).add(i)
            return cost
    return 0


def _unique(by_edge: dict[int, str], edges: list[int]) -> dict[int, str]:
    """Edges only one page has (pages stored before ordinals existed all start at 0)."""
    return {edge: pid for edge, pid in by_edge.items() if edges.count(edge) == 1}


def _runs(indexes: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for i in indexes:
        if runs and runs[-1][1] == i:
            runs[-1] = (runs[-1][0], i + 1)
        else:
            runs.append((i, i + 1))
    return runs
