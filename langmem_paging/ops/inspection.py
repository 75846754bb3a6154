"""What `inspect` shows: a thread's pages, clusters and recalls, and where the latest checkpoint's
paging state puts each page."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langmem_paging.core.effects import drive
from langmem_paging.core.forest import members_of, parent_index, walk_root
from langmem_paging.core.messages import METADATA_KEY, library_mark, recall_copy_pages
from langmem_paging.core.records import ClusterNode, Page, cluster_number, page_number
from langmem_paging.core.state import PagingState
from langmem_paging.core.tokens import message_text
from langmem_paging.ops.portable import record_counts
from langmem_paging.ops.snapshots import Snapshot
from langmem_paging.storage.page_store import PageStore

__all__ = [
    "ClusterRow",
    "Inspection",
    "PageRow",
    "RecallRow",
    "SnapshotInfo",
    "cluster_roots",
    "inspect_thread",
]


def cluster_roots(
    nodes: Sequence[ClusterNode], idents: Iterable[str], state: PagingState | None = None
) -> dict[str, str | None]:
    """The cluster root holding each page or cluster id (None: in no cluster), as `PageStore.find`
    answers it, but from already-listed cluster records: no store call and no path-compression
    writes, so inspecting a thread never changes it.

    With `state`, only clusters the branch made count and its shown roots end the walk; without,
    the newest cluster at each level is followed.
    """
    parents = parent_index(nodes)
    owned = None if state is None else (lambda c: state.owns("c", cluster_number(c)))
    roots = None if state is None else state.clusters
    return {
        ident: drive(walk_root(ident, owned=owned, roots=roots), lambda node: parents.get(node, [])).root
        for ident in idents
    }


@dataclass
class PageRow:
    """One stored page, as `inspect` lists it."""

    id: str
    """Page id."""
    tokens: int
    """Tokens of its messages."""
    messages: int
    """How many messages it holds."""
    created_turn: int
    """User turn in which it formed."""
    order: int
    """History ordinal of its first message (pages sort into history order by it)."""
    kind: str
    """``page`` or ``tool_result`` (a large tool result paged on arrival)."""
    access_count: int
    """Recalls of it: the checkpoint's count on its branch if a checkpoint is given, else the
    store's mirror (updated at the step after a recall)."""
    cluster: str | None
    """The cluster root holding it (on the checkpoint's branch if given), or None."""
    status: str
    """On the checkpoint's branch: ``resident`` (its messages are in the context), ``bookmark``
    or ``digest`` (shown by its own line), ``cluster`` (under a shown cluster bookmark), ``stub``
    (a large tool result paged on arrival, shown by the stub that replaced it, in the context or
    inside the page that holds it), ``other-branch`` (made by another branch), ``unshown``
    (nothing points at it); ``-`` without a checkpoint."""
    bookmark: str
    """Its bookmark text."""


@dataclass
class ClusterRow:
    """One stored cluster node."""

    id: str
    """Cluster id."""
    size: int
    """Member pages."""
    span: str
    """Lowest and highest member page, ``p1-p9``."""
    children: list[str]
    """Pages and clusters it joined."""
    root: str | None
    """The cluster root above it (on the checkpoint's branch if given), or None for a root."""
    shown: bool
    """A root shown in the context by its cluster bookmark (needs a checkpoint)."""
    bookmark: str
    """Its cluster bookmark text."""


@dataclass
class RecallRow:
    """A `recall` result found in the checkpoint's messages or inside a stored page."""

    message_id: str
    """Id of the recall ToolMessage."""
    pages: list[str]
    """Pages whose text it returned."""
    args: dict[str, Any]
    """What the model asked (the tool call's arguments), if the call was found."""
    where: str
    """``context`` (in the checkpoint's messages) or the id of the page that holds it."""
    shrunk: bool
    """Its text was replaced by a reference (rebuilt exactly from the store when needed)."""


@dataclass
class SnapshotInfo:
    """The latest checkpoint's paging state."""

    checkpoint_id: str
    """The checkpoint."""
    created_at: str | None
    """When it was written."""
    messages: int
    """Messages in the state."""
    mode: str
    """``replace`` (bookmarks stand in the state's messages) or ``view`` (the state keeps everything)."""
    turn: int
    """User turns paging has seen."""
    tokens: int
    """Tokens of the view the last paging step produced."""
    budget: int
    """The message budget of that step (``max_tokens`` minus system prompt and tools)."""
    resident: list[str]
    """Formed pages whose messages are still in the context."""
    shown: dict[str, str]
    """Evicted pages shown by their own line: page id -> ``bookmark`` or ``digest``."""
    clusters: dict[str, list[str]]
    """Shown cluster roots -> their member pages."""
    unpaged: int
    """Messages in the state that no stored page holds (the live tail, pinned messages; bookmark
    lines are not counted)."""
    bookmarks: list[str]
    """The bookmark lines in the context, in order."""


@dataclass
class Inspection:
    """Everything `inspect` shows about a thread."""

    thread_id: str
    """The thread."""
    records: dict[str, int]
    """Store records of the thread by kind (pages, clusters, parents, stats, meta)."""
    pages: list[PageRow]
    """Every stored page (all branches), in history order."""
    clusters: list[ClusterRow]
    """Every stored cluster node, in id order."""
    recalls: list[RecallRow]
    """Recall results found in the checkpoint's messages and in stored pages."""
    checkpoint: SnapshotInfo | None = None
    """The latest checkpoint's paging state, if checkpoints were available."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe."""
        return asdict(self)


def _status(page_id: str, root: str | None, state: PagingState | None, stubs: set[str]) -> str:
    if state is None:
        return "-"
    if not state.owns("p", page_number(page_id)):
        return "other-branch"
    if page_id in state.pages:
        return "resident"
    if page_id in state.shown:
        return "bookmark" if state.shown[page_id].tier == "cold" else "digest"
    if root is not None and root in state.clusters:
        return "cluster"
    if page_id in stubs:
        return "stub"
    return "unshown"


def _is_recall_result(message: BaseMessage) -> bool:
    return (
        isinstance(message, ToolMessage)
        and isinstance(message.artifact, dict)
        and isinstance(message.artifact.get(METADATA_KEY), dict)
    )


def _recalls(messages: Sequence[BaseMessage], pages: Sequence[Page]) -> list[RecallRow]:
    places = [("context", m) for m in messages] + [(p.id, m) for p in pages for m in p.messages]
    calls = {
        c["id"]: c.get("args", {})
        for _, m in places
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c.get("id")
    }
    rows = []
    for where, m in places:
        if _is_recall_result(m):
            rows.append(
                RecallRow(
                    message_id=m.id or "",
                    pages=recall_copy_pages(m),
                    args=dict(calls.get(getattr(m, "tool_call_id", ""), {})),
                    where=where,
                    shrunk=bool(library_mark(m).get("shrunk")),
                )
            )
    return rows


def inspect_thread(page_store: PageStore, thread_id: str, snapshot: Snapshot | None = None) -> Inspection:
    """A thread's pages, clusters and recalls, and what the snapshot's paging state makes of them.

    Args:
        page_store: The thread's page store.
        thread_id: The thread.
        snapshot: Its latest checkpoint (`load_snapshots`), or None for the store alone.

    Returns:
        An `Inspection`; pages in history order (`Page.order`), clusters in id order.
    """
    pages = page_store.list_pages(thread_id)
    nodes = page_store.list_clusters(thread_id)
    state = PagingState.from_value(snapshot.paging) if snapshot is not None else None
    roots = cluster_roots(nodes, [p.id for p in pages] + [n.id for n in nodes], state)
    clusters = [
        ClusterRow(
            id=n.id,
            size=n.size,
            span=f"p{n.first_page}-p{n.last_page}",
            children=list(n.children),
            root=roots[n.id],
            shown=state is not None and n.id in state.clusters,
            bookmark=n.bookmark,
        )
        for n in nodes
    ]
    return Inspection(
        thread_id=thread_id,
        records=record_counts(page_store.store, thread_id),
        pages=_page_rows(pages, roots, state, snapshot),
        clusters=clusters,
        recalls=_recalls(snapshot.messages if snapshot is not None else [], pages),
        checkpoint=_snapshot_info(snapshot, state, pages, nodes) if snapshot is not None and state else None,
    )


def _page_rows(
    pages: list[Page], roots: dict[str, str | None], state: PagingState | None, snapshot: Snapshot | None
) -> list[PageRow]:
    """Every page in history order, with where the checkpoint's branch puts it."""
    context = snapshot.messages if snapshot is not None else []
    stubs = {
        mark["paged_result"]
        for m in [*context, *(m for p in pages for m in p.messages)]
        if isinstance((mark := library_mark(m)).get("paged_result"), str)
    }
    rows = []
    for page in sorted(pages, key=lambda p: (p.order, page_number(p.id))):
        count = (
            state.access(page.id)[0]
            if state is not None and state.owns("p", page_number(page.id))
            else page.access_count
        )
        rows.append(
            PageRow(
                id=page.id,
                tokens=page.token_count,
                messages=len(page.messages),
                created_turn=page.created_turn,
                order=page.order,
                kind=page.kind,
                access_count=count,
                cluster=roots[page.id],
                status=_status(page.id, roots[page.id], state, stubs),
                bookmark=page.bookmark,
            )
        )
    return rows


def _snapshot_info(
    snapshot: Snapshot, state: PagingState, pages: list[Page], nodes: list[ClusterNode]
) -> SnapshotInfo:
    """The checkpoint's paging state as `inspect` shows it."""
    by_id = {n.id: n for n in nodes}
    in_pages = {m.id for p in pages for m in p.messages}
    marked = [_is_stand_in(m) for m in snapshot.messages]
    return SnapshotInfo(
        checkpoint_id=snapshot.checkpoint_id,
        created_at=snapshot.created_at,
        messages=len(snapshot.messages),
        mode="view" if state.skeleton is not None else "replace",
        turn=state.turn,
        tokens=state.tokens,
        budget=state.budget,
        resident=sorted(state.pages, key=page_number),
        shown={
            p: ("bookmark" if s.tier == "cold" else "digest")
            for p, s in sorted(state.shown.items(), key=lambda kv: page_number(kv[0]))
        },
        clusters={c: _members(by_id, c) for c in sorted(state.clusters, key=cluster_number)},
        unpaged=sum(
            1 for m, mark in zip(snapshot.messages, marked, strict=True) if m.id not in in_pages and not mark
        ),
        bookmarks=[message_text(m) for m, mark in zip(snapshot.messages, marked, strict=True) if mark],
    )


def _is_stand_in(message: BaseMessage) -> bool:
    mark = library_mark(message)
    return bool(mark.get("bookmark") or mark.get("cluster"))


def _members(nodes: Mapping[str, ClusterNode], cluster_id: str) -> list[str]:
    """Page ids under a cluster in page order ([] if a node on the way is missing)."""
    members = members_of(cluster_id, nodes.get)
    return members.pages if members.complete else []
