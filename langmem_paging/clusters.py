"""The cold tier: old bookmarks fold into cluster bookmarks, so the context stays bounded.

When bookmarks pass their share of the budget, the oldest page bookmarks fold into
clusters: a page joins the most similar cluster root above `threshold`, or starts
one; past `max_clusters` the closest pair of roots merges. The clusters form a
union-find forest over pages whose nodes never change: every union creates a new
node (a new id) with the two things it joined as children, and the checkpoint
keeps the roots. So `find` (child -> parent pointers, stored with the thread) and
expanding a cluster (its children) are exact on every branch, and a cluster's
bookmark stands where its first member page was.

This module only plans: `plan_folds` decides unions with provisional ids, and
`materialize` turns the plan into `ClusterNode` records and the messages that
replace or remove bookmarks once real ids are reserved.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from langmem_paging.records import ClusterNode, page_number
from langmem_paging.state import ClusterEntry, PagingState

__all__ = [
    "ClusterOptions",
    "FoldPlan",
    "format_cluster_bookmark",
    "member_span",
    "merge_terms",
    "plan_folds",
    "similarity",
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
    def for_share(cls, bookmark_tokens: int, *, threshold: float = 0.2, max_clusters: int | None = None
                  ) -> ClusterOptions:
        """Options for a bookmark share of `bookmark_tokens`: by default as many cluster roots as
        half the share holds at ~32 tokens a cluster bookmark (at least 2)."""
        return cls(bookmark_tokens=bookmark_tokens, threshold=threshold,
                   max_clusters=max_clusters or max(2, bookmark_tokens // 2 // 32))


def similarity(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Cosine similarity of two weighted term maps, case-insensitive; 0.0 when either is empty."""
    la, lb = _lower(a), _lower(b)
    if len(la) > len(lb):
        la, lb = lb, la
    dot = sum(w * lb.get(t, 0.0) for t, w in la.items())
    if dot <= 0.0:
        return 0.0
    return dot / (math.sqrt(sum(w * w for w in la.values())) * math.sqrt(sum(w * w for w in lb.values())))


def _lower(terms: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for term, weight in terms.items():
        key = term.lower()
        out[key] = out.get(key, 0.0) + weight
    return out


def _unit(terms: Mapping[str, float]) -> dict[str, float]:
    norm = math.sqrt(sum(w * w for w in terms.values())) or 1.0
    return {t: w / norm for t, w in terms.items()}


def merge_terms(a: Mapping[str, float], b: Mapping[str, float], *, limit: int = MAX_TERMS) -> dict[str, float]:
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


def member_span(first: int, last: int, size: int) -> str:
    """``p1-p9`` when the members are every page in between, else ``12 of p1-p40``."""
    if first == last:
        return f"p{first}"
    if last - first + 1 == size:
        return f"p{first}-p{last}"
    return f"{size} of p{first}-p{last}"


def format_cluster_bookmark(cluster_id: str, keywords: list[str], first: int, last: int, size: int) -> str:
    """``[c2:Farid,greyhound,adoption|p1-p9]``."""
    return f"[{cluster_id}:{','.join(keywords)}|{member_span(first, last, size)}]"


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


@dataclass
class FoldPlan:
    """Unions decided by `plan_folds`, with provisional ids ``?1``, ``?2``, ... for new nodes."""

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
    count_bookmark: Callable[[str], int],
    orphans: list[str] = (),
    orphan_clusters: list[str] = (),
    direct: list[str] = (),
    displaced: list[str] = (),
) -> FoldPlan:
    """Decide which bookmarks fold into which clusters (pure; `state` is not changed).

    Args:
        state: The branch's paging state after eviction.
        position: View position of every message id.
        options: Folding options.
        count_bookmark: Tokens of a bookmark message with the given text.
        orphans: Shown pages whose bookmark left the context (replaced by the user):
            they fold into the nearest cluster whatever the share.
        orphan_clusters: Cluster roots whose bookmark left the context: they merge into the
            nearest root still shown; with none (the history was replaced), they are dropped.
        direct: Shown pages evicted with no bookmark (smaller than it): they fold into the nearest
            cluster whatever the share, or start one.
        displaced: Orphan clusters whose bookmark's id another message took: with no other root
            to merge into, they take the place of the most similar page bookmark in the view.
    """
    plan = FoldPlan()
    roots = {
        cid: _Root(cid, c.anchor, c.size, c.first, c.last, dict(c.terms), [cid], new=False)
        for cid, c in state.clusters.items()
    }
    counter = iter(range(1, 1_000_000))

    digests: dict[str, str] = {}

    def new_node(children: list[str], anchor: str, size: int, first: int, last: int, terms) -> _Root:
        # A Merkle digest: provisional children count by their own digest, so the digest
        # names the node's content before ids are reserved.
        parts = "\x1f".join(digests.get(c, c) for c in children)
        node = _Root(f"?{next(counter)}", anchor, size, first, last, terms, children,
                     digest=hashlib.blake2b(parts.encode(), digest_size=8).hexdigest())
        digests[node.key] = node.digest
        plan.nodes.append(node)
        return node

    def estimate(root: _Root) -> int:
        keywords = [t for t, _ in sorted(root.terms.items(), key=lambda tw: (-tw[1], tw[0]))][: options.max_keywords]
        return count_bookmark(format_cluster_bookmark("c00", keywords, root.first, root.last, root.size))

    def join(root: _Root | None, page_id: str) -> _Root:
        shown = state.shown[page_id]
        n = page_number(page_id)
        terms = _unit(shown.terms)
        if root is None:
            return new_node([page_id], shown.anchor, 1, n, n, terms)
        del roots[root.key]
        anchors = sorted([root.anchor, shown.anchor], key=lambda a: position.get(a, 1 << 60))
        plan.removed_anchors.append(anchors[1])
        return new_node([root.key, page_id], anchors[0], root.size + 1, min(root.first, n), max(root.last, n),
                        merge_terms(root.terms, terms))

    def fold(page_id: str, *, force: bool) -> None:
        terms = state.shown[page_id].terms
        best = max(roots.values(), key=lambda r: (similarity(terms, r.terms), -position.get(r.anchor, 0)),
                   default=None)
        if best is not None and not force and similarity(terms, best.terms) < options.threshold:
            best = None
        node = join(best, page_id)
        roots[node.key] = node
        plan.folded.append(page_id)

    def merge_closest() -> None:
        ordered = sorted(roots.values(), key=lambda r: position.get(r.anchor, 0))
        best_pair, best_sim = None, -1.0
        for i, a in enumerate(ordered):
            for b in ordered[i + 1 :]:
                sim = similarity(a.terms, b.terms)
                if sim > best_sim:
                    best_pair, best_sim = (a, b), sim
        a, b = best_pair
        del roots[a.key], roots[b.key]
        plan.removed_anchors.append(b.anchor)  # `ordered` puts a before b
        node = new_node([a.key, b.key], a.anchor, a.size + b.size, min(a.first, b.first), max(a.last, b.last),
                        merge_terms(a.terms, b.terms))
        roots[node.key] = node

    def house(orphan: _Root) -> None:
        homes = [pid for pid, s in state.shown.items()
                 if pid not in orphans and s.tier == "cold" and s.anchor in position]
        if homes:
            fold(max(homes, key=lambda pid: (similarity(state.shown[pid].terms, orphan.terms),
                                             -position[state.shown[pid].anchor])), force=True)

    for cid in orphan_clusters:
        orphan = roots.pop(cid, None)  # merged into a root still shown, or gone with its history
        others = [r for r in roots.values() if r.key not in orphan_clusters]
        if orphan is not None and not others and cid in displaced:
            roots[cid] = orphan  # its id was taken by a new message: it takes a page bookmark's place
            house(orphan)
            continue
        if orphan is None or not others:
            continue
        roots[cid] = orphan
        nearest = max(others, key=lambda r: (similarity(orphan.terms, r.terms), -position.get(r.anchor, 0)))
        del roots[orphan.key], roots[nearest.key]
        plan.removed_anchors.append(orphan.anchor)
        node = new_node([nearest.key, orphan.key], nearest.anchor, nearest.size + orphan.size,
                        min(nearest.first, orphan.first), max(nearest.last, orphan.last),
                        merge_terms(nearest.terms, orphan.terms))
        roots[node.key] = node
    for page_id in orphans:
        if page_id in state.shown and roots:
            fold(page_id, force=True)
    for page_id in direct:
        if page_id not in plan.folded:
            fold(page_id, force=True)

    folded = set(plan.folded)
    cold = sorted(
        (pid for pid, s in state.shown.items() if s.tier == "cold" and pid not in folded),
        key=lambda pid: position.get(state.shown[pid].anchor, 0),
    )
    shown_tokens = sum(state.shown[pid].tokens for pid in cold)

    def total() -> int:
        return shown_tokens + sum(estimate(r) if r.new else state.clusters[r.key].tokens for r in roots.values())

    if total() > options.bookmark_tokens:
        goal = options.bookmark_tokens * options.fold_to
        for page_id in cold:
            if total() <= goal:
                break
            shown_tokens -= state.shown[page_id].tokens
            fold(page_id, force=False)
            while len(roots) > options.max_clusters:
                merge_closest()
        while len(roots) > 1 and total() > options.bookmark_tokens:
            merge_closest()
    plan.roots = roots
    return plan


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
        children = [rename.get(c, c) for c in root.children]
        keywords = _keywords(root.terms, max_keywords)
        nodes.append(
            ClusterNode(
                id=cid,
                children=children,
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
        if not root.new:
            continue
        node = by_id[rename[root.key]]
        entries[node.id] = ClusterEntry(
            anchor=root.anchor, text=node.bookmark, tokens=0, size=root.size, first=root.first,
            last=root.last, terms=dict(root.terms),
        )
    return nodes, entries, rename


def _keywords(terms: Mapping[str, float], limit: int) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    for term, _ in sorted(terms.items(), key=lambda tw: (-tw[1], tw[0].lower())):
        if term.lower() not in seen:
            out.append(term)
            seen.add(term.lower())
        if len(out) >= limit:
            break
    return out
