"""The cluster forest over a thread's pages: one home for walking it.

Cluster nodes are immutable (`langmem_paging.core.records.ClusterNode`): every union makes a new node
whose children are the two things it joined, and the store keeps, for each page or cluster, the
clusters that joined it (parent pointers). Two walks answer every question about the forest:

- `walk_members`: the pages under a cluster (expanding sub-clusters), and whether every node on
  the way exists (a complete cluster can be expanded exactly);
- `walk_root`: the root a page or cluster is shown under (union-find ``find``), on a branch.

Both are generators of reads, so the same walk runs over the store, sync or async
(`PageStore.members`, `PageStore.find`), or over nodes already in hand (`reconstruct_history`,
the operator tools) with `langmem_paging.core.effects.drive`.

Example:
    >>> from langmem_paging.core.effects import drive
    >>> from langmem_paging.core.records import ClusterNode
    >>> nodes = {"c1": ClusterNode("c1", ["p1", "p2"], 2, 1, 2, "[c1:a|p1-p2]"),
    ...          "c2": ClusterNode("c2", ["c1", "p3"], 3, 1, 3, "[c2:a|p1-p3]")}
    >>> members = drive(walk_members("c2"), lambda ids: {i: nodes[i] for i in ids if i in nodes})
    >>> members.pages, members.complete
    (['p1', 'p2', 'p3'], True)
    >>> parents = parent_index(nodes.values())
    >>> drive(walk_root("p1"), lambda ident: parents.get(ident, [])).root
    'c2'
"""

from __future__ import annotations

from collections.abc import Callable, Container, Generator, Iterable, Mapping
from dataclasses import dataclass, field

from langmem_paging.core.effects import drive
from langmem_paging.core.records import ClusterNode, cluster_number, is_id, page_number

__all__ = ["Members", "RootWalk", "members_of", "parent_index", "walk_members", "walk_root"]

MAX_DEPTH = 10_000
"""A walk longer than this is a cycle in corrupt records: stop rather than loop."""


@dataclass
class Members:
    """The pages under a cluster."""

    pages: list[str] = field(default_factory=list)
    """Member page ids, each once, in page order (at most the walk's `limit`)."""
    missing: list[str] = field(default_factory=list)
    """Cluster nodes on the way that are not stored (the cluster cannot be expanded exactly)."""

    @property
    def complete(self) -> bool:
        """True when every node on the way exists."""
        return not self.missing


@dataclass
class RootWalk:
    """Where `walk_root` ended."""

    root: str | None
    """The cluster root holding the page or cluster, or None when it is in no cluster."""
    path: list[str] = field(default_factory=list)
    """The nodes visited below the root (for path compression)."""


def walk_members(
    cluster_id: str, *, limit: int | None = None
) -> Generator[list[str], Mapping[str, ClusterNode], Members]:
    """Yield the cluster ids to read, level by level (answer: the nodes that exist); return the
    member pages. With `limit`, stop once that many pages are found (the first levels' pages)."""
    found: set[str] = set()
    out = Members()
    frontier, seen = [cluster_id], {cluster_id}
    while frontier and (limit is None or len(found) < limit):
        nodes = yield frontier
        next_level: list[str] = []
        for cid in sorted(frontier, key=_cluster_order):
            node = nodes.get(cid)
            if node is None:
                out.missing.append(cid)
                continue
            for child in node.children:
                if child.startswith("p"):
                    found.add(child)
                elif child not in seen:
                    seen.add(child)
                    next_level.append(child)
        frontier = next_level
    out.pages = sorted(found, key=page_number)[:limit]
    return out


def walk_root(
    ident: str, *, owned: Callable[[str], bool] | None = None, roots: Container[str] | None = None
) -> Generator[str, list[str], RootWalk]:
    """Yield each node whose parents to read (answer: the ids of the clusters that joined it);
    return the root above `ident`.

    Args:
        ident: A page or cluster id.
        owned: Only clusters this accepts count (a branch's own: ``state.owns("c", n)``).
        roots: Nodes that end the walk (a branch's shown roots); without them, the newest
            parent at each level is followed (the most recent branch).
    """
    node, path = ident, []
    for _ in range(MAX_DEPTH):
        parents = [p for p in (yield node) if is_id(p, cluster_number)]
        if owned is not None:
            parents = [p for p in parents if owned(p)]
        if not parents or (roots is not None and node in roots):
            break
        path.append(node)
        node = max(parents, key=cluster_number)
    return RootWalk(None if node == ident else node, path)


def parent_index(nodes: Iterable[ClusterNode]) -> dict[str, list[str]]:
    """Parent pointers rebuilt from listed nodes: child id -> the clusters that joined it."""
    parents: dict[str, list[str]] = {}
    for node in nodes:
        for child in node.children:
            parents.setdefault(child, []).append(node.id)
    return parents


def members_of(cluster_id: str, get_node: Callable[[str], ClusterNode | None]) -> Members:
    """`walk_members` over nodes already in hand (a mapping's ``get``, or a caching fetcher)."""
    return drive(walk_members(cluster_id), lambda ids: {i: n for i in ids if (n := get_node(i)) is not None})


def _cluster_order(cluster_id: str) -> int:
    try:
        return cluster_number(cluster_id)
    except ValueError:
        return 0
