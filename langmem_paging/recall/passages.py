"""Passages: the best-matching messages of paged-out pages, with their neighbours, as many as fit.

A search hit is one message of a page. Hits are taken best first, and how much context a hit
brings depends on its rank (`neighbours_for_rank`): the best few bring `neighbours` messages on
each side, the others one, so the room holds many hits rather than a few wide windows (evidence
ranking 11-188 in the search was never reached with +-2 for every hit). Windows cross into the page before or after where the conversation runs on across the page edge.
Only the messages not chosen yet cost room, so overlapping windows merge as they are packed; a
window too long for what is left shrinks (fewer neighbours, then the hit alone), and a hit that
does not fit even alone is skipped while later, shorter ones still go in: one passage gives way,
never a page group. A second pass widens the windows of the hits shown, best first, into what is
left. Costs are the rendering's (`page_cost`, the tokens a page's passages take in the result),
so the result fills its room and never passes it.

Turns still in the context rank beside the paged ones: one that ranks is kept where it is (it
costs its own tokens, and the next step does not page it out to make room), with its neighbours
in the context by the same rule as a hit's, so a recall never pushes out a resident match nor
the reply next to it (LoCoMo dev, conversations 0-3, B=8000: 15 of the 18 evidence turns the
flat baseline found and paging lost were no hit of the search: the baseline had them as the
neighbours of a match). The result is grouped by page, pages in the order of their best hit,
each page's messages as runs in order.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from langmem_paging.core.records import Page
    >>> def page(pid, order, n):
    ...     return Page(id=pid, messages=[HumanMessage(f"{pid} m{i}", id=f"{pid}-{i}") for i in range(n)],
    ...                 bookmark="", keywords=[], token_count=n, boundary="fixed_4", created_turn=1, order=order)
    >>> pages = {"p1": page("p1", 0, 4), "p2": page("p2", 4, 4)}
    >>> hits = [Hit("p2", 0, 3.0), Hit("p1", 1, 1.0)]
    >>> def cost(page, runs):  # a header and each message: 3 tokens
    ...     return 3 + 3 * sum(b - a for a, b in runs)
    >>> pack_hits(hits, pages, page_cost=cost, room=100, neighbours=1).groups
    [('p2', [(0, 2)]), ('p1', [(0, 4)])]
    >>> pack_hits(hits, pages, page_cost=cost, room=18, neighbours=1).groups  # p1's hit comes alone
    [('p2', [(0, 2)]), ('p1', [(1, 2), (3, 4)])]
    >>> packed = pack_hits(hits, pages, page_cost=cost, room=18, neighbours=1, resident=[(2.0, 3)])
    >>> packed.groups, packed.resident, packed.used  # the resident turn ranks before p1's hit
    ([('p2', [(0, 2)]), ('p1', [(3, 4)])], [0], 18)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from langmem_paging.core.records import Page, page_number
from langmem_paging.index.base import Hit

__all__ = ["Packed", "adjacent_pages", "neighbours_for_rank", "pack_hits"]

Position = tuple[str, int]
WIDE_HITS = 8
"""The best hits bring `neighbours` messages on each side, the others one (a hit comes alone
only when its window does not fit). Evidence coverage on LoCoMo dev's first
two conversations at B=2000/4000/8000 (lexical reader, search mode), one run: +-2 for the best 8,
+-1 to the 40th, then alone, 0.809/0.883/0.900; +-2 for the best 8 and +-1 for every other hit,
0.809/0.883/0.909 (with bookmarks yielding and the second hop: 0.823/0.892/0.905, against
0.823/0.892/0.896 with hits alone after the 40th); +-2 for the best 12 then +-1 to the 40th then alone,
0.814/0.866/0.905; +-2 for every hit, 0.814/0.857/0.900; +-2 for 4, +-1 to the 12th, then
alone, 0.801/0.849/0.875 (hits far down the ranking carry evidence less often than the
neighbours of the best ones)."""


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
        spans = {
            pid: (p.order, p.order + len(p.messages))
            for pid, p in pages.items()
            if p.kind == "page" and p.messages
        }
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


Runs = list[tuple[int, int]]
PageCost = Callable[[Page, Runs], int]


def neighbours_for_rank(rank: int, neighbours: int) -> int:
    """Messages on each side of the hit ranked `rank` (0-based): `neighbours` for the best
    `WIDE_HITS`, at most one for the others."""
    return neighbours if rank < WIDE_HITS else min(1, neighbours)


@dataclass
class Packed:
    """What a search result shows and keeps."""

    groups: list[tuple[str, Runs]] = field(default_factory=list)
    """Pages in the order of their best hit, each with its chosen messages as ``[start, stop)`` runs."""
    resident: list[int] = field(default_factory=list)
    """Indexes of the resident candidates that ranked and fit, and of their neighbours kept with
    them: kept in the context."""
    used: int = 0
    """Tokens the groups and the kept resident turns take (by `page_cost` and the candidates' own)."""
    hits: int = 0
    """Hits shown (their message is in a group)."""


def pack_hits(
    hits: Sequence[Hit],
    pages: Mapping[str, Page],
    *,
    page_cost: PageCost,
    room: int,
    neighbours: int,
    resident: Sequence[tuple[float, int]] = (),
    taken: Mapping[str, Sequence[tuple[int, int]]] | None = None,
) -> Packed:
    """The hits' windows that fit in `room` tokens, best first, and the resident candidates
    (``(score, tokens)``, on the hits' scale) that rank among them and fit.

    `page_cost(page, runs)` is what a page's passages take in the result (its rendering and
    newline); `taken`: runs already shown (a first search's), which cost nothing and are kept."""
    packer = _Packer(pages, page_cost, room, taken or {}, [tokens for _, tokens in resident])
    packed = Packed()
    ranked: list[tuple[float, int, Hit | int]] = [(h.score, 0, h) for h in hits]
    ranked += [(score, 1, k) for k, (score, _) in enumerate(resident) if score > 0]
    shown: list[tuple[Hit | int, int]] = []
    for _, _, item in sorted(ranked, key=lambda r: (-r[0], r[1])):
        if room - packer.used < MIN_LINE_TOKENS:
            break  # full: no line fits what is left
        width = packer.add(item, neighbours_for_rank(len(shown), neighbours))
        if width is not None:
            shown.append((item, width))
    for target in range(1, neighbours + 1):  # the second pass: wider windows, best hits first
        for k, (item, width) in enumerate(shown):
            if width < target and packer.widen(item, target):
                shown[k] = (item, target)
    packed.groups, packed.resident = packer.groups(), list(packer.kept)
    packed.used, packed.hits = packer.used, sum(isinstance(item, Hit) for item, _ in shown)
    return packed


MIN_LINE_TOKENS = 3
"""No message line with its newline takes fewer tokens (a name, a colon, a word)."""


class _Packer:
    """The chosen messages per page and what they cost, added to window by window."""

    def __init__(
        self,
        pages: Mapping[str, Page],
        page_cost: PageCost,
        room: int,
        taken: Mapping[str, Sequence[tuple[int, int]]],
        resident: Sequence[int] = (),
    ) -> None:
        self.pages, self.page_cost, self.room = pages, page_cost, room
        self.resident = resident  # tokens of each resident candidate, in context order
        self.kept: dict[int, None] = {}  # resident candidates kept, in the order they were added
        self.conversation = _Conversation(pages)
        self.chosen: dict[str, set[int]] = {
            pid: {i for a, b in runs for i in range(a, b)} for pid, runs in taken.items() if pid in pages
        }
        self.costs: dict[str, int] = {
            pid: page_cost(pages[pid], _runs(sorted(ix))) for pid, ix in self.chosen.items()
        }
        self.base = dict(self.costs)
        self.used = 0

    def add(self, item: Hit | int, width: int) -> int | None:
        """Add the item's widest window up to `width` that fits; the width shown, or None."""
        if isinstance(item, Hit) and (
            item.page_id not in self.pages or not 0 <= item.index < len(self.pages[item.page_id].messages)
        ):
            return None
        for w in range(width, -1, -1):
            if self.widen(item, w):
                return w
        return None

    def widen(self, item: Hit | int, width: int) -> bool:
        if isinstance(item, int):
            return self._keep(item, width)
        return self._add(self.conversation.window((item.page_id, item.index), width), item.page_id)

    def _keep(self, k: int, width: int) -> bool:
        """Keep resident candidate `k` with `width` candidates on each side: a turn still in the
        context brings its neighbours as a paged hit does (the reply to a matching turn is often
        the evidence, and the next step pages out what is not kept)."""
        window = [j for j in range(k - width, k + width + 1) if 0 <= j < len(self.resident)]
        new = [j for j in window if j not in self.kept]
        delta = sum(self.resident[j] for j in new)
        if self.used + delta > self.room:
            return False
        self.kept.update(dict.fromkeys(sorted(new, key=lambda j: (j != k, j))))
        self.used += delta
        return True

    def _add(self, window: list[Position], page_id: str) -> bool:
        new: dict[str, set[int]] = {}
        for pid, i in window:
            if i not in self.chosen.get(pid, ()):
                new.setdefault(pid, set()).add(i)
        if not new:
            return True  # already shown whole
        costs = {
            pid: self.page_cost(self.pages[pid], _runs(sorted(self.chosen.get(pid, set()) | ix)))
            for pid, ix in new.items()
        }
        delta = sum(cost - self.costs.get(pid, 0) for pid, cost in costs.items())
        if self.used + delta > self.room:
            return False
        self.chosen.setdefault(page_id, set())  # pages in the order of their best hit
        for pid, ix in new.items():
            self.chosen.setdefault(pid, set()).update(ix)
        self.costs.update(costs)
        self.used += delta
        return True

    def groups(self) -> list[tuple[str, Runs]]:
        return [(pid, _runs(sorted(ix))) for pid, ix in self.chosen.items() if ix]


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
