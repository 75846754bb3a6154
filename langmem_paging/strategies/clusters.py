"""The cold tier: old bookmarks fold into cluster bookmarks, so the context stays bounded.

When bookmarks pass their share of the budget, the oldest page bookmarks fold into
clusters: a page joins the most similar cluster root above `threshold`, or starts
one; past `max_clusters` the closest pair of roots merges. The clusters form a
union-find forest over pages whose nodes never change: every union creates a new
node (a new id) with the two things it joined as children, and the checkpoint
keeps the roots. So `find` (child -> parent pointers, stored with the thread) and
expanding a cluster (its children) are exact on every branch (`langmem_paging.core.forest`),
and a cluster's bookmark stands where its first member page was.

This module only plans: a `FoldPlanner` decides unions with provisional ids, and
`materialize` turns the plan into `ClusterNode` records once real ids are reserved.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from langchain_core.messages import BaseMessage

from langmem_paging.core.library_messages import (
    cluster_bookmark_tokens,
    cluster_keywords,
    format_cluster_bookmark,
)
from langmem_paging.core.records import ClusterNode, page_number
from langmem_paging.core.state import ClusterEntry, PagingState
from langmem_paging.core.text import cosine

__all__ = [
    "ClusterOptions",
    "FoldPlan",
    "FoldPlanner",
    "materialize",
    "merge_terms",
    "plan_folds",
]

MAX_TERMS = 32


@dataclass(frozen=True)
class ClusterOptions:
    """How the cold tier folds bookmarks."""

    bookmark_tokens: int
    """Tokens page and cluster bookmarks may take together before old ones fold."""
    fold_to: float = 0.6
    """When folding, fold until bookmarks take at most this share of `bookmark_tokens`."""
    threshold: float = 0.2
    """A page joins a cluster when its terms' cosine similarity reaches this."""
    max_clusters: int = 8
    """Cluster roots at most; past it the closest pair merges."""
    max_keywords: int = 6
    """Keywords in a cluster bookmark."""

    @classmethod
    def for_share(
        cls, bookmark_tokens: int, *, threshold: float = 0.2, max_clusters: int | None = None
    ) -> ClusterOptions:
        """Options for a bookmark share of `bookmark_tokens`: by default as many cluster roots as
        half the share holds at ~32 tokens a cluster bookmark (at least 2)."""
        return cls(
            bookmark_tokens=bookmark_tokens,
            threshold=threshold,
            max_clusters=max_clusters or max(2, bookmark_tokens // 2 // 32),
        )


def _lower(terms: Mapping[str, float]) -> dict[str, float]:
    """Terms case-folded, their weights summed: similarity (cosine) is case-insensitive."""
    out: dict[str, float] = {}
    for term, weight in terms.items():
        key = term.lower()
        out[key] = out.get(key, 0.0) + weight
    return out


def _unit(terms: Mapping[str, float]) -> dict[str, float]:
    norm = math.sqrt(sum(w * w for w in terms.values())) or 1.0
    return {t: w / norm for t, w in terms.items()}


def merge_terms(
    a: Mapping[str, float], b: Mapping[str, float], *, limit: int = MAX_TERMS
) -> dict[str, float]:
    """Each term's strongest weight in either map (pages normalized), strongest `limit` kept.

    A cluster's top terms are then its members' most distinctive terms; a theme word many
    members have strongly ranks with them. (Summing weights instead favours filler words
    every member has, which tells a reader nothing: measured on LoCoMo and synthetic chats.)
    """
    merged = dict(a)
    for term, weight in b.items():
        merged[term] = max(merged.get(term, 0.0), weight)
    top = sorted(merged.items(), key=lambda tw: (-tw[1], tw[0]))[:limit]
    return dict(top)


@dataclass
class _Root:
    """A cluster root while planning: provisional id until ids are reserved."""

    key: str
    anchor: str
    size: int
    first: int
    last: int
    terms: dict[str, float]
    children: list[str]
    new: bool = True
    digest: str = ""
    tokens: int | None = None
    """A new root's cluster bookmark tokens, once estimated (a root never changes: a union makes a new one)."""

    @property
    def span(self) -> tuple[int, int, int]:
        return self.first, self.last, self.size

    @cached_property
    def lowered(self) -> dict[str, float]:
        """Its terms case-folded (`_lower`), once per root."""
        return _lower(self.terms)


@dataclass
class FoldPlan:
    """Unions decided by a `FoldPlanner`, with provisional ids ``?1``, ``?2``, ... for new nodes."""

    nodes: list[_Root] = field(default_factory=list)
    """New nodes in creation order (each a union of its children)."""
    roots: dict[str, _Root] = field(default_factory=dict)
    """The roots after the plan (existing ids or provisional ones)."""
    removed_anchors: list[str] = field(default_factory=list)
    """Bookmark messages that disappear (their page or cluster joined another root)."""
    folded: list[str] = field(default_factory=list)
    """Page ids folded into clusters."""

    def __bool__(self) -> bool:
        return bool(self.nodes)


def plan_folds(
    state: PagingState,
    position: Mapping[str, int],
    options: ClusterOptions,
    *,
    count_message: Callable[[BaseMessage], int],
    direct: Sequence[str] = (),
) -> FoldPlan:
    """Which bookmarks fold into which clusters (pure): `FoldPlanner.decide`, for one plan."""
    return FoldPlanner(state, position, options, count_message).decide(direct)


class FoldPlanner:
    """Decides which bookmarks fold into which clusters (pure: `state` is not changed), made once a
    fold: `past_share` tells without reading any terms whether a fold is due (only then does the step
    read the entries' terms: `langmem_paging.step.io.with_terms`), `decide` plans it over a working
    copy of the roots, `shrinks` tells whether the plan makes the stand-ins smaller.

    Args:
        state: The branch's paging state after eviction.
        position: View position of every message id.
        options: Folding options.
        count_message: Tokens of a message (cluster bookmarks are measured as they will be shown).
    """

    def __init__(
        self,
        state: PagingState,
        position: Mapping[str, int],
        options: ClusterOptions,
        count_message: Callable[[BaseMessage], int],
    ) -> None:
        self.state, self.position, self.options, self.count_message = state, position, options, count_message
        self.plan = FoldPlan()
        self.roots: dict[str, _Root] = {}
        self.digests: dict[str, str] = {}
        self.similarities: dict[tuple[str, str], float] = {}

    def decide(self, direct: Sequence[str] = ()) -> FoldPlan:
        """The plan, once the entries' terms are read (`direct`: shown pages evicted with no bookmark,
        smaller than it: they fold into the nearest cluster whatever the share, or start one)."""
        self.roots = {
            cid: _Root(cid, c.anchor, c.size, c.first, c.last, dict(c.terms), [cid], new=False)
            for cid, c in self.state.clusters.items()
        }
        for page_id in direct:
            if page_id not in self.plan.folded:
                self.fold(page_id, force=True)
        self.fold_old_bookmarks()
        self.plan.roots = self.roots
        return self.plan

    def at(self, anchor: str, default: int = 0) -> int:
        return self.position.get(anchor, default)

    def new_node(
        self, children: list[str], anchor: str, span: tuple[int, int, int], terms: dict[str, float]
    ) -> _Root:
        """A union of `children`; its digest names its content before ids are reserved (a Merkle
        digest: provisional children count by their own digest)."""
        parts = "\x1f".join(self.digests.get(c, c) for c in children)
        first, last, size = span
        node = _Root(
            f"?{len(self.plan.nodes) + 1}",
            anchor,
            size,
            first,
            last,
            terms,
            children,
            digest=hashlib.blake2b(parts.encode(), digest_size=8).hexdigest(),
        )
        self.digests[node.key] = node.digest
        self.plan.nodes.append(node)
        self.roots[node.key] = node
        return node

    def union(self, keep: _Root, other: _Root) -> None:
        """Merge two roots; the bookmark of `other` leaves, the new root stands at `keep`'s place."""
        del self.roots[keep.key], self.roots[other.key]
        self.plan.removed_anchors.append(other.anchor)
        self.new_node(
            [keep.key, other.key],
            keep.anchor,
            (min(keep.first, other.first), max(keep.last, other.last), keep.size + other.size),
            merge_terms(keep.terms, other.terms),
        )

    def fold(self, page_id: str, *, force: bool) -> None:
        """A shown page joins the most similar root (above the threshold unless forced), or starts one."""
        shown = self.state.shown[page_id]
        lowered = _lower(shown.terms)
        best, score = max(
            ((r, cosine(lowered, r.lowered)) for r in self.roots.values()),
            key=lambda rs: (rs[1], -self.at(rs[0].anchor)),
            default=(None, 0.0),
        )
        if best is not None and not force and score < self.options.threshold:
            best = None
        n, terms = page_number(page_id), _unit(shown.terms)
        if best is None:
            self.new_node([page_id], shown.anchor, (n, n, 1), terms)
        else:
            del self.roots[best.key]
            first, second = sorted([best.anchor, shown.anchor], key=lambda a: self.at(a, 1 << 60))
            self.plan.removed_anchors.append(second)
            self.new_node(
                [best.key, page_id],
                first,
                (min(best.first, n), max(best.last, n), best.size + 1),
                merge_terms(best.terms, terms),
            )
        self.plan.folded.append(page_id)

    def merge_closest(self) -> None:
        """Merge the two most similar roots (the earlier one's place keeps the bookmark)."""
        ordered = sorted(self.roots.values(), key=lambda r: self.at(r.anchor))
        pairs = [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :]]
        best = max(pairs, key=self.pair_similarity)  # the first of equals
        self.union(*best)

    def pair_similarity(self, pair: tuple[_Root, _Root]) -> float:
        """Cosine similarity of two roots, once per pair a plan (roots never change: merges make new ones)."""
        a, b = pair
        key = (a.key, b.key)
        if key not in self.similarities:
            self.similarities[key] = cosine(a.lowered, b.lowered)
        return self.similarities[key]

    def estimate(self, root: _Root) -> int:
        """Tokens of a root's cluster bookmark: as shown for an existing one, as it will be for a new one."""
        if not root.new:
            return self.state.clusters[root.key].tokens
        if root.tokens is None:
            root.tokens = cluster_bookmark_tokens(
                root.terms,
                root.span,
                max_keywords=self.options.max_keywords,
                count_message=self.count_message,
            )
        return root.tokens

    def cold(self) -> list[str]:
        """Cold page bookmarks not folded yet, oldest first."""
        folded = set(self.plan.folded)
        shown = self.state.shown
        return sorted(
            (pid for pid, s in shown.items() if s.tier == "cold" and pid not in folded),
            key=lambda pid: self.at(shown[pid].anchor),
        )

    def past_share(self) -> bool:
        """Bookmarks take more than their share (counted from tokens alone: no terms needed yet)."""
        shown, clusters = self.state.shown, self.state.clusters.values()
        total = sum(shown[pid].tokens for pid in self.cold()) + sum(c.tokens for c in clusters)
        return total > self.options.bookmark_tokens

    def shrinks(self) -> bool:
        """Whether the plan's new cluster bookmarks take fewer tokens (estimated as when planning) than
        the bookmarks and cluster bookmarks they replace: folding must not make the view bigger (a
        lone bookmark folded into a one-page cluster can: pure fuzz seed 20206, 134 -> 137 tokens)."""
        plan = self.plan
        after = sum(self.estimate(root) for root in plan.roots.values() if root.new)
        before = sum(self.state.shown[p].tokens for p in plan.folded)
        before += sum(c.tokens for cid, c in self.state.clusters.items() if cid not in plan.roots)
        return after < before

    def fold_old_bookmarks(self) -> None:
        """Past the share, the oldest cold bookmarks fold until bookmarks are back under `fold_to`
        of it; past `max_clusters`, the closest roots merge."""
        shown = self.state.shown
        cold = self.cold()
        page_tokens = sum(shown[pid].tokens for pid in cold)

        def total() -> int:
            return page_tokens + sum(self.estimate(r) for r in self.roots.values())

        if total() <= self.options.bookmark_tokens:
            return
        goal = self.options.bookmark_tokens * self.options.fold_to
        for page_id in cold:
            if total() <= goal:
                break
            page_tokens -= shown[page_id].tokens
            self.fold(page_id, force=False)
            while len(self.roots) > self.options.max_clusters:
                self.merge_closest()
        while len(self.roots) > 1 and total() > self.options.bookmark_tokens:
            self.merge_closest()


def materialize(
    plan: FoldPlan, numbers: list[int], *, max_keywords: int
) -> tuple[list[ClusterNode], dict[str, ClusterEntry], dict[str, str]]:
    """Give the plan's new nodes their reserved numbers.

    Returns:
        The new `ClusterNode` records, the new roots as `ClusterEntry` (tokens left 0 for the
        caller to count), and the id each provisional id became.
    """
    rename: dict[str, str] = {}
    nodes: list[ClusterNode] = []
    for root, number in zip(plan.nodes, numbers, strict=True):
        cid = f"c{number}"
        rename[root.key] = cid
        keywords = cluster_keywords(root.terms, max_keywords)
        nodes.append(
            ClusterNode(
                id=cid,
                children=[rename.get(c, c) for c in root.children],
                size=root.size,
                first_page=root.first,
                last_page=root.last,
                bookmark=format_cluster_bookmark(cid, keywords, root.first, root.last, root.size),
                keywords=keywords,
                terms=dict(root.terms),
                digest=root.digest,
            )
        )
    by_id = {node.id: node for node in nodes}
    entries = {}
    for root in plan.roots.values():
        if root.new:
            node = by_id[rename[root.key]]
            entries[node.id] = ClusterEntry(
                anchor=root.anchor,
                text=node.bookmark,
                tokens=0,
                size=root.size,
                first=root.first,
                last=root.last,
                terms=dict(root.terms),
            )
    return nodes, entries, rename
