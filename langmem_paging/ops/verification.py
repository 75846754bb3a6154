"""`verify`: rebuild a thread's history from its latest checkpoint and the store, and check it
against every message the branch's checkpoints ever held."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from langmem_paging.core.forest import members_of
from langmem_paging.core.messages import is_user_turn, library_mark, recall_copy_pages
from langmem_paging.core.records import ClusterNode, Page
from langmem_paging.core.state import PagingState
from langmem_paging.core.tokens import TokenCounter, message_text
from langmem_paging.ops.snapshots import Snapshot
from langmem_paging.recall.history import reconstruct_history
from langmem_paging.storage.page_store import PageStore

__all__ = ["CannotVerify", "Issue", "Verification", "verify_thread"]


@dataclass
class Issue:
    """One reason a thread is not lossless."""

    code: str
    """``missing-page``, ``missing-cluster``, ``unresolved-bookmark``,
    ``duplicate``, ``lost``, ``changed``, ``order``, ``user-turns``; as a warning, ``off-branch``."""
    detail: str
    """What is wrong, naming the page, cluster or message."""


class CannotVerify(ValueError):
    """No checkpoint to check the thread against: losslessness can be neither shown nor refuted
    (the checkpoints may simply live elsewhere, e.g. in the checkpointer's own file)."""


@dataclass
class Verification:
    """The result of `verify_thread`."""

    thread_id: str
    """The thread."""
    lossless: bool
    """No issue found."""
    issues: list[Issue] = field(default_factory=list)
    """What is wrong (empty when lossless)."""
    checkpoints: int = 0
    """Checkpoints on the latest branch that were read."""
    rebuilt: int = 0
    """Messages in the rebuilt history."""
    seen: int = 0
    """Distinct message ids the checkpoints ever held."""
    user_turns: int = 0
    """User turns in the rebuilt history."""
    pages_used: int = 0
    """Stored pages the rebuild read."""
    forgotten: list[str] = field(default_factory=list)
    """Ids of messages forgotten on purpose (`PageStore.forget`): rebuilt as tombstones, not compared
    (nor are the recall results that showed their pages: `forget` shrinks them, and they rebuild from
    the scrubbed pages)."""
    unverified: list[str] = field(default_factory=list)
    """Ids of messages no checkpoint held in their original form (e.g. a run saved with
    ``durability="exit"``): present, but their text could not be compared."""
    off_branch: list[str] = field(default_factory=list)
    """Ids of messages a checkpoint off the latest branch held and the latest branch never did:
    turns a run lost to another run on the thread at the same time (LangGraph's last write wins;
    serialize runs per thread), or left on a fork on purpose (time travel). Not an issue: the
    latest branch can still be lossless; `warnings` names them."""
    warnings: list[Issue] = field(default_factory=list)
    """What may be wrong without making the thread lossy (``off-branch``)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe."""
        return asdict(self)


def _same(a: BaseMessage, b: BaseMessage) -> bool:
    """Same message as the model saw it: type, text, name, tool calls and tool call id."""
    return (
        a.type == b.type
        and a.content == b.content
        and a.name == b.name
        and getattr(a, "tool_call_id", None) == getattr(b, "tool_call_id", None)
        and [(c.get("id"), c.get("name"), c.get("args")) for c in getattr(a, "tool_calls", []) or []]
        == [(c.get("id"), c.get("name"), c.get("args")) for c in getattr(b, "tool_calls", []) or []]
    )


def _is_original(message: BaseMessage) -> bool:
    """Not a library stand-in (bookmark, cluster bookmark, paged-result stub, shrunk recall)."""
    mark = library_mark(message)
    return not any(mark.get(k) for k in ("bookmark", "cluster", "paged_result", "shrunk"))


def _short(text: Any, limit: int = 60) -> str:
    s = text if isinstance(text, str) else json.dumps(text, default=str)
    return s if len(s) <= limit else s[: limit - 3] + "..."


class _Fetcher:
    """Pages and clusters read once each; what was asked but missing is remembered."""

    def __init__(self, page_store: PageStore, thread_id: str) -> None:
        self.page_store, self.thread_id = page_store, thread_id
        self.pages: dict[str, Page | None] = {}
        self.nodes: dict[str, ClusterNode | None] = {}

    def page(self, page_id: str) -> Page | None:
        if page_id not in self.pages:
            self.pages[page_id] = self.page_store.get(self.thread_id, page_id)
        return self.pages[page_id]

    def node(self, cluster_id: str) -> ClusterNode | None:
        if cluster_id not in self.nodes:
            self.nodes[cluster_id] = self.page_store.get_cluster(self.thread_id, cluster_id)
        return self.nodes[cluster_id]

    def prefetch(self, page_ids: Iterable[str]) -> None:
        wanted = [p for p in page_ids if p not in self.pages]
        found = self.page_store.get_many(self.thread_id, wanted)
        self.pages.update({p: found.get(p) for p in wanted})


def _referenced(
    state: PagingState, messages: Sequence[BaseMessage], fetch: _Fetcher, issues: list[Issue]
) -> None:
    """Every page and cluster the checkpoint points at must be in the store."""
    wanted = _pointed_at(state, messages)
    cluster_marks = {
        mark["cluster"]: m.id for m in messages if isinstance((mark := library_mark(m)).get("cluster"), str)
    }
    for cluster_id in dict.fromkeys([*state.clusters, *cluster_marks]):
        members = members_of(cluster_id, fetch.node)
        for cid in members.missing:
            where = f"under cluster {cluster_id}" if cid != cluster_id else "a shown cluster root"
            issues.append(Issue("missing-cluster", f"cluster {cid} ({where}) is not in the store"))
        for page_id in members.pages:
            wanted.setdefault(page_id, f"member of cluster {cluster_id}")
    fetch.prefetch(wanted)
    for page_id, why in wanted.items():
        if fetch.page(page_id) is None:
            issues.append(Issue("missing-page", f"page {page_id} ({why}) is not in the store"))
    for message in messages:
        mark = library_mark(message)
        target = mark.get("bookmark") or mark.get("cluster")
        if isinstance(target, str) and not _resolves(fetch, target):
            issues.append(
                Issue(
                    "unresolved-bookmark",
                    f"bookmark {_short(message_text(message))!r} (message {message.id}) does not resolve",
                )
            )


def _pointed_at(state: PagingState, messages: Sequence[BaseMessage]) -> dict[str, str]:
    """Pages the state and the messages point at, and why (the first reason found)."""
    wanted: dict[str, str] = {}
    for page_id in state.pages:
        wanted.setdefault(page_id, "resident in the checkpoint")
    for page_id in state.shown:
        wanted.setdefault(page_id, "shown by a bookmark")
    for message in messages:
        mark = library_mark(message)
        if isinstance(mark.get("bookmark"), str):
            wanted.setdefault(mark["bookmark"], f"bookmark message {message.id}")
        if isinstance(mark.get("paged_result"), str):
            wanted.setdefault(mark["paged_result"], f"paged tool result {message.id}")
        for page_id in recall_copy_pages(message):
            wanted.setdefault(page_id, f"recall result {message.id}")
    return wanted


def _resolves(fetch: _Fetcher, target: str) -> bool:
    """A page bookmark's page exists; a cluster bookmark's whole subtree and its pages do."""
    if target.startswith("p"):
        return fetch.page(target) is not None
    members = members_of(target, fetch.node)
    return members.complete and all(fetch.page(p) is not None for p in members.pages)


def _ordinals(history: Sequence[BaseMessage], state: PagingState, fetch: _Fetcher) -> dict[str, int]:
    """History ordinals of the rebuilt messages, from the pages and the paging state."""
    out: dict[str, int] = {}
    for page in fetch.pages.values():
        if page is not None:
            for i, m in enumerate(page.messages):
                out.setdefault(m.id or "", page.order + i)
    for resident in state.pages.values():
        for i, key in enumerate(resident.ids):
            out[key] = resident.order + i
    out.update(state.order)
    return {m.id: out[m.id] for m in history if m.id in out}


def verify_thread(
    page_store: PageStore,
    thread_id: str,
    snapshots: Sequence[Snapshot],
    *,
    counter: TokenCounter | None = None,
    others: Sequence[Snapshot] = (),
) -> Verification:
    """Rebuild the thread's history from its latest checkpoint and the store, and check it is lossless.

    Checks: every page and cluster the checkpoint references is stored and every bookmark
    resolves; the rebuilt history holds no message twice and its history ordinals increase;
    every message id any checkpoint of the branch ever held appears in it exactly once, in
    the order it first appeared, with the content it first had; and (in replace mode) it has
    as many user turns as the checkpoints saw.

    Args:
        page_store: The thread's page store.
        thread_id: The thread.
        snapshots: The branch's checkpoints, oldest first (`load_snapshots`).
        counter: The tokenizer recall results were rendered with (default cl100k): a shrunk
            recall result is re-rendered with it.
        others: The thread's checkpoints off that branch (`load_branches`): messages they held
            that the branch never did are listed in ``off_branch`` with an ``off-branch`` warning.

    Returns:
        A `Verification`; ``lossless`` is True when no issue was found.

    Raises:
        CannotVerify: When `snapshots` is empty (nothing to check against: not a loss).
    """
    if not snapshots:
        raise CannotVerify(
            f"cannot verify thread {thread_id!r}: no checkpoints of it were given (they hold "
            "what the rebuilt history is checked against)"
        )
    result = Verification(thread_id=thread_id, lossless=False, checkpoints=len(snapshots))
    latest = snapshots[-1]
    state = PagingState.from_value(latest.paging)
    fetch = _Fetcher(page_store, thread_id)
    _referenced(state, latest.messages, fetch, result.issues)
    history = reconstruct_history(
        latest.messages, fetch.page, counter, clusters=fetch.node, state=latest.paging
    )
    result.rebuilt = len(history)
    result.pages_used = sum(p is not None for p in fetch.pages.values())
    result.issues += _duplicates(history) + _ordinal_order(history, state, fetch)
    first = _first_seen(snapshots)
    result.seen = len(first)
    result.forgotten = [m.id or "" for m in history if library_mark(m).get("forgotten")]
    scrubbed = _shows_scrubbed(history, fetch) if result.forgotten else set()
    result.issues += _compare(first, history, result.unverified, {*result.forgotten, *scrubbed})
    result.issues += _arrival_order(first, history)
    result.user_turns = sum(1 for m in history if is_user_turn(m))
    if state.skeleton is None:
        result.issues += _user_turns(result.user_turns, first)
    result.off_branch = _off_branch(others, first)
    result.warnings += _off_branch_warning(result.off_branch)
    result.lossless = not result.issues
    return result


def _first_seen(snapshots: Sequence[Snapshot]) -> dict[str, BaseMessage]:
    """Every message id the checkpoints held, with the message as it first appeared, in that order."""
    first: dict[str, BaseMessage] = {}
    for snapshot in snapshots:
        for message in snapshot.messages:
            first.setdefault(message.id or "", message)
    return first


def _user_turns(rebuilt: int, first: Mapping[str, BaseMessage]) -> list[Issue]:
    """An issue when the rebuilt history has another number of user turns than the checkpoints saw."""
    seen = sum(1 for m in first.values() if _is_original(m) and is_user_turn(m))
    if rebuilt == seen:
        return []
    return [Issue("user-turns", f"the rebuilt history has {rebuilt} user turns, the checkpoints saw {seen}")]


def _off_branch_warning(off_branch: Sequence[str]) -> list[Issue]:
    """The ``off-branch`` warning listing (the first 20 of) `off_branch`, if any."""
    if not off_branch:
        return []
    shown = ", ".join(off_branch[:20]) + (" ..." if len(off_branch) > 20 else "")
    return [
        Issue(
            "off-branch",
            f"{len(off_branch)} message(s) held by checkpoints off the latest branch are not on it "
            f"(lost to a concurrent run on the thread, or left on a fork): {shown}",
        )
    ]


def _shows_scrubbed(history: Sequence[BaseMessage], fetch: _Fetcher) -> set[str]:
    """Ids of the recall results that showed a page holding a forgotten message."""
    return {
        m.id or ""
        for m in history
        if any(
            (page := fetch.page(pid)) is not None
            and any(library_mark(x).get("forgotten") for x in page.messages)
            for pid in recall_copy_pages(m)
        )
    }


def _off_branch(others: Sequence[Snapshot], on_branch: dict[str, BaseMessage]) -> list[str]:
    """Original messages checkpoints off the branch held and no checkpoint of the branch did."""
    found = (m.id for s in others for m in s.messages if m.id and _is_original(m) and m.id not in on_branch)
    return list(dict.fromkeys(found))


def _duplicates(history: Sequence[BaseMessage]) -> list[Issue]:
    positions: dict[str | None, list[int]] = {}
    for i, message in enumerate(history):
        positions.setdefault(message.id, []).append(i)
    return [
        Issue("duplicate", f"message {key} appears {len(where)} times (positions {where})")
        for key, where in positions.items()
        if len(where) > 1
    ]


def _ordinal_order(history: Sequence[BaseMessage], state: PagingState, fetch: _Fetcher) -> list[Issue]:
    """The rebuilt history's ordinals never decrease (messages a rewrite put between others share one)."""
    ordinals = _ordinals(history, state, fetch)
    issues = []
    previous: tuple[str, int] | None = None
    for message in history:
        if message.id not in ordinals:
            continue
        if previous is not None and ordinals[message.id] < previous[1]:  # equal: list order decides
            issues.append(
                Issue(
                    "order",
                    f"message {message.id} (ordinal {ordinals[message.id]}) follows "
                    f"{previous[0]} (ordinal {previous[1]})",
                )
            )
        previous = (message.id, ordinals[message.id])
    return issues


def _compare(
    first: dict[str, BaseMessage], history: Sequence[BaseMessage], unverified: list[str], forgotten: set[str]
) -> list[Issue]:
    """Every message the checkpoints held is rebuilt, with the content it first had."""
    rebuilt = {m.id: m for m in history}
    issues = []
    lost = [key for key in first if key not in rebuilt]
    if lost:
        shown = "; ".join(f"{key} ({first[key].type}) {_short(first[key].content, 40)!r}" for key in lost[:5])
        issues.append(
            Issue(
                "lost",
                f"{len(lost)} message(s) the checkpoints held are not in the rebuilt "
                f"history, e.g. {shown}{' ...' if len(lost) > 5 else ''}",
            )
        )
    for key, original in first.items():
        if key not in rebuilt or key in forgotten:
            continue
        if not _is_original(original):
            unverified.append(key)
        elif not _same(original, rebuilt[key]):
            issues.append(
                Issue(
                    "changed",
                    f"message {key} ({original.type}) differs: checkpoint had "
                    f"{_short(original.content)!r}, rebuilt {_short(rebuilt[key].content)!r}",
                )
            )
    return issues


def _arrival_order(first: dict[str, BaseMessage], history: Sequence[BaseMessage]) -> list[Issue]:
    """The rebuilt history keeps the order messages arrived in (but repair results: after their call)."""
    arrived = {k: m for k, m in first.items() if not library_mark(m).get("repair")}
    rebuilt = {m.id for m in history}
    expected = [k for k in arrived if k in rebuilt]
    actual = list(dict.fromkeys(m.id for m in history if m.id in arrived))
    if expected == actual:
        return []
    at = next(
        (i for i, (a, b) in enumerate(zip(expected, actual, strict=False)) if a != b),
        min(len(expected), len(actual)),
    )
    return [
        Issue(
            "order",
            f"rebuilt history departs from the order messages arrived in at position "
            f"{at}: expected {expected[at] if at < len(expected) else 'end'}, "
            f"got {actual[at] if at < len(actual) else 'end'}",
        )
    ]
