"""Passages: the best-matching messages of paged-out pages, with their neighbours.

A search hit is one message of a page. A passage is that message with `neighbours`
messages on each side (within its page), merged with overlapping passages of the
same page. Passages are packed best first into the room a recall has, then shown
grouped under their page, in page order, so the model reads them in context.

Example:
    >>> hits = [Hit("p2", 5, 3.0), Hit("p2", 7, 2.0), Hit("p9", 0, 1.0)]
    >>> [(p.page_id, p.start, p.stop) for p in build_passages(hits, {"p2": 20, "p9": 4}, neighbours=1)]
    [('p2', 4, 9), ('p9', 0, 2)]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from langmem_paging.search import Hit

__all__ = ["Passage", "build_passages", "pack_passages"]


@dataclass(frozen=True)
class Passage:
    """A run of messages of one page."""

    page_id: str
    """The page."""
    start: int
    """First message (index in the page)."""
    stop: int
    """One past the last message."""
    score: float
    """The best hit score inside."""
    best: int = -1
    """The message of the best hit (index in the page; -1: unknown)."""

    def around_best(self, neighbours: int) -> Passage:
        """The passage cut down to its best hit and `neighbours` messages on each side."""
        best = self.best if self.start <= self.best < self.stop else self.start
        return Passage(self.page_id, max(self.start, best - neighbours), min(self.stop, best + neighbours + 1),
                       self.score, best)


def build_passages(hits: Sequence[Hit], page_sizes: Mapping[str, int], *, neighbours: int) -> list[Passage]:
    """Passages around `hits` (best first), merged within each page when they overlap or touch."""
    spans: dict[str, list[list[float]]] = {}  # [start, stop, score, best hit]
    for hit in hits:
        size = page_sizes.get(hit.page_id)
        if size is None:
            continue
        start, stop = max(0, hit.index - neighbours), min(size, hit.index + neighbours + 1)
        spans.setdefault(hit.page_id, []).append([float(start), float(stop), hit.score, float(hit.index)])
    out = []
    for page_id, items in spans.items():
        items.sort()
        merged = [items[0]]
        for first, after, score, best in items[1:]:
            last = merged[-1]
            if first <= last[1]:
                last[1] = max(last[1], after)
                if score > last[2]:
                    last[2], last[3] = score, best
            else:
                merged.append([first, after, score, best])
        out += [Passage(page_id, int(a), int(b), s, int(h)) for a, b, s, h in merged]
    return sorted(out, key=lambda p: (-p.score, p.page_id, p.start))


def pack_passages(
    passages: Sequence[Passage], cost: Callable[[Passage], int], room: int
) -> list[tuple[str, list[tuple[int, int]]]]:
    """The best passages that fit in `room` tokens, grouped by page: pages in order of their
    best passage, each page's spans in message order. A passage too long for what is left is cut
    down to its best hit with one neighbour on each side, or the hit alone, rather than skipped
    (merged passages of a page where the query's words recur can be long)."""
    chosen: list[Passage] = []
    used = 0
    for passage in passages:
        for candidate in (passage, passage.around_best(1), passage.around_best(0)):
            c = cost(candidate)
            if used + c <= room:
                chosen.append(candidate)
                used += c
                break
    groups: dict[str, list[tuple[int, int]]] = {}
    for passage in chosen:
        groups.setdefault(passage.page_id, []).append((passage.start, passage.stop))
    return [(page_id, sorted(spans)) for page_id, spans in groups.items()]
