"""Forgetting one message everywhere a page left it: pure functions over records and state.

A page lives in its store record, its search-index rows, its page bookmark, the cluster bookmarks
above it, the keyword sketch and the checkpointed state the next prompt is built from. `PageStore.forget`
runs the one write path (store records in one batch, then the index's `update`, then the state);
this module computes what each place becomes, so the path is written once for sync and async.

What a forgotten message leaves behind is decided by its *words*: a term (a lowercased word or its
stem) is gone from a scope (a page, the pages under a cluster, the thread) when the forgotten text
held it and nothing left in that scope does. Bookmarks and term maps lose the gone terms; a bookmark
left with no keyword becomes a neutral mark (``[p3:]``).

Re-running converges: records already scrubbed are written again unchanged, and the state is
re-derived from the records (a state entry's terms that its scrubbed record no longer holds go,
from the entry and from the sketch), so a crash between the writes is repaired by running it again.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> page = Page(id="p2", messages=[HumanMessage("card 4929 1234 Quixotrix", id="c"),
    ...                                HumanMessage("my card expired", id="d")],
    ...             bookmark="[p2:4929,1234,Quixotrix,card]", keywords=["4929", "1234", "Quixotrix", "card"],
    ...             token_count=9, boundary="fixed_2", created_turn=1)
    >>> scrubbed, gone = forget_in_page(page, "c")
    >>> scrubbed.bookmark, sorted(gone)
    ('[p2:card]', ['1234', '4929', 'quixotrix'])
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langmem_paging.core.library_messages import (
    bookmark_message,
    cluster_keywords,
    cluster_message,
    format_bookmark,
    format_cluster_bookmark,
    parse_bookmark,
    shrink_recall_copy,
)
from langmem_paging.core.messages import (
    METADATA_KEY,
    dump_messages,
    library_mark,
    load_messages,
    recall_copy_shown,
)
from langmem_paging.core.records import ClusterNode, Page, cluster_number, messages_digest
from langmem_paging.core.state import STATE_KEY, PagingState, ResidentPage, ShownPage, TermSketch
from langmem_paging.core.text import search_terms
from langmem_paging.core.tokens import message_text

__all__ = [
    "FORGOTTEN",
    "Forgotten",
    "Lifecycle",
    "forget_in_cluster",
    "forget_in_page",
    "forget_in_records",
    "forget_in_sketch",
    "forget_in_state",
    "forgotten",
    "merged_messages",
    "term_keys",
    "tombstone",
    "vocabulary",
]

FORGOTTEN = "[forgotten]"
"""The text a forgotten message keeps."""

_WORD = re.compile(r"\w+")


@dataclass
class Lifecycle:
    """A thread's lifecycle record (``meta``/``lifecycle``), the one a state or an in-process index
    compares with what it was built from. Written with the thread's first pages or its first forget,
    rewritten with a new `generation` by every forget in the batch of its scrub, deleted with the
    thread (no record: the thread has nothing, or predates the record)."""

    generation: str
    """Changes with every forget (a random token: a thread deleted and started again never repeats
    one)."""
    forgotten: dict[str, list[str]] = field(default_factory=dict)
    """Each forgotten message id and the pages that hold it (derived again by every forget, so a
    re-run writes the same)."""

    def to_record(self) -> dict[str, Any]:
        """The store value."""
        return {"generation": self.generation, "forgotten": self.forgotten}

    @classmethod
    def from_record(cls, value: Mapping[str, Any]) -> Lifecycle:
        """From a store value."""
        return cls(str(value["generation"]), {k: list(v) for k, v in value.get("forgotten", {}).items()})

    @classmethod
    def new(cls, forgotten: Mapping[str, list[str]] | None = None) -> Lifecycle:
        """A record with a fresh generation (64 random bits: it only has to differ from the thread's
        earlier ones, and the checkpoint carries it at every step)."""
        return cls(uuid.uuid4().hex[:16], dict(forgotten or {}))


@dataclass
class Forgotten:
    """What forgetting one message changed in the store, and what the state must lose."""

    message_id: str
    """The forgotten message."""
    pages: list[Page] = field(default_factory=list)
    """The pages that hold it, scrubbed (tombstone, bookmark, terms), whether this run changed them
    or an earlier one did."""
    nodes: list[ClusterNode] = field(default_factory=list)
    """The cluster nodes above those pages whose bookmark or terms this run changed (written)."""
    gone: set[str] = field(default_factory=set)
    """Terms of the forgotten text no page of the thread holds any more (for the keyword sketch)."""
    above: list[ClusterNode] = field(default_factory=list)
    """Every cluster node above those pages as the store now holds it (what a state's cluster
    bookmarks are corrected from, on a re-run too)."""
    earlier: list[str] = field(default_factory=list)
    """Messages forgotten before (the lifecycle record's), tombstoned in the state too."""
    generation: str | None = None
    """The lifecycle generation the corrected state records."""


def vocabulary(texts: Iterable[str]) -> set[str]:
    """Every lowercased word and every stem (`search_terms`) of `texts`."""
    out: set[str] = set()
    for text in texts:
        out.update(w.lower() for w in _WORD.findall(text))
        out.update(search_terms(text))
    return out


def term_keys(term: str) -> set[str]:
    """The forms a bookmark keyword or a weighted term is matched under (its words and stems)."""
    return vocabulary([term]) or {term.lower()}


def _is_gone(term: str, gone: set[str]) -> bool:
    return bool(gone) and not term_keys(term).isdisjoint(gone)


def _kept_keyword(keyword: str, gone: set[str]) -> str:
    """A bookmark's keyword without the gone words: a run of words (``boat harbour moored photo``,
    the default bookmarker's) loses only those; a short one (``25 May``) goes whole."""
    if not _is_gone(keyword, gone):
        return keyword
    words = keyword.split()
    return " ".join(w for w in words if not _is_gone(w, gone)) if len(words) > 2 else ""


def _kept_terms(terms: Mapping[str, float], gone: set[str]) -> dict[str, float]:
    return {t: w for t, w in terms.items() if not _is_gone(t, gone)}


def forgotten(page: Page, message_id: str) -> Page:
    """`page` with message `message_id` a tombstone (its text, tool arguments and metadata gone)."""
    messages = [tombstone(m) if m.id == message_id else m for m in page.messages]
    return replace(page, messages=messages, digest=messages_digest(messages))


def tombstone(message: BaseMessage) -> BaseMessage:
    """The message with the same id, type and tool-call ids, holding `FORGOTTEN` only."""
    update: dict[str, Any] = {
        "content": FORGOTTEN,
        "additional_kwargs": {METADATA_KEY: {"forgotten": True}},
        "response_metadata": {},
    }
    if isinstance(message, AIMessage):
        update["tool_calls"] = [{**call, "args": {}} for call in message.tool_calls]
        update["invalid_tool_calls"] = [{**call, "args": ""} for call in message.invalid_tool_calls]
    if isinstance(message, ToolMessage):
        update["artifact"] = None
    return message.model_copy(update=update)


def _texts(messages: Sequence[BaseMessage]) -> list[str]:
    return [message_text(m) for m in messages]


def forget_in_page(page: Page, message_id: str) -> tuple[Page, set[str]]:
    """The page with the message a tombstone and its bookmark, keywords and term features re-derived
    from what remains; and the terms gone from the page. A page already scrubbed comes back equal."""
    said = vocabulary(_texts([m for m in page.messages if m.id == message_id]))
    scrubbed = forgotten(page, message_id)
    gone = said - vocabulary(_texts(scrubbed.messages))
    keywords = [k for k in page.keywords if not _is_gone(k, gone)]
    parsed = parse_bookmark(page.bookmark)
    if parsed is not None:
        bookmark = format_bookmark(page.id, [k for k in (_kept_keyword(k, gone) for k in parsed[1]) if k])
    else:  # a bookmarker's own shape (a stub, a sentence): kept only if none of its words went
        bookmark = (
            page.bookmark if vocabulary([page.bookmark]).isdisjoint(gone) else format_bookmark(page.id, [])
        )
    features = dict(page.features)
    if isinstance(features.get("terms"), dict):
        features["terms"] = _kept_terms(features["terms"], gone)
    scrubbed.bookmark, scrubbed.keywords, scrubbed.features = bookmark, keywords, features
    return scrubbed, gone


def forget_in_cluster(node: ClusterNode, gone: set[str]) -> ClusterNode:
    """The node with `gone` terms out of its terms, keywords and bookmark (re-derived from the terms
    left, as `clusters.materialize` derives them; a neutral mark when none is left)."""
    terms = _kept_terms(node.terms, gone)
    limit = max(len(node.keywords), 1)
    keywords = (
        cluster_keywords(terms, limit) if terms else [k for k in node.keywords if not _is_gone(k, gone)]
    )
    bookmark = format_cluster_bookmark(node.id, keywords, node.first_page, node.last_page, node.size)
    return replace(node, children=list(node.children), bookmark=bookmark, keywords=keywords, terms=terms)


def forget_in_records(pages: Sequence[Page], nodes: Sequence[ClusterNode], message_id: str) -> Forgotten:
    """Scrub every record of a thread that holds or summarizes message `message_id` (`pages`: all of
    the thread's pages; `nodes`: all of its cluster nodes). Only changed records are returned."""
    result = Forgotten(message_id)
    said: set[str] = set()
    by_id: dict[str, Page] = {}
    for page in pages:
        holds = [m for m in page.messages if m.id == message_id]
        by_id[page.id] = forget_in_page(page, message_id)[0] if holds else page
        if holds:
            said |= vocabulary(_texts(holds))
            result.pages.append(by_id[page.id])
    if not result.pages:
        return result
    result.gone = said - vocabulary(t for p in by_id.values() for t in _texts(p.messages))
    _forget_above(result, nodes, by_id, said)
    return result


def _forget_above(
    result: Forgotten, nodes: Sequence[ClusterNode], by_id: Mapping[str, Page], said: set[str]
) -> None:
    """The cluster nodes above the scrubbed pages of `result`, re-derived from what their pages still
    hold (`result.above`; those that changed also in `result.nodes`)."""
    changed = {p.id for p in result.pages}
    members = _members({n.id: n for n in nodes})
    for node in nodes:
        under = members.get(node.id, set())
        if under.isdisjoint(changed):
            continue
        kept = vocabulary(t for pid in under if pid in by_id for t in _texts(by_id[pid].messages))
        new = forget_in_cluster(node, said - kept)
        result.above.append(new)
        if new.to_dict() != node.to_dict():
            result.nodes.append(new)


def forget_in_sketch(sketch: TermSketch, gone: set[str]) -> TermSketch:
    """The thread's keyword sketch without the terms gone from the whole thread (its page count
    stays: the pages are still there)."""
    kept = {t: n for t, n in sketch.doc_freq.items() if not _is_gone(t, gone)}
    return TermSketch(kept, sketch.n_pages, [list(s) for s in sketch.counted])


def _members(nodes: Mapping[str, ClusterNode]) -> dict[str, set[str]]:
    """Page ids under each cluster node (children before parents: cluster numbers only grow)."""
    out: dict[str, set[str]] = {}
    for cid in sorted(nodes, key=cluster_number):
        under: set[str] = set()
        for child in nodes[cid].children:
            under |= out.get(child, set()) if child.startswith("c") else {child}
        out[cid] = under
    return out


# -- the state the next prompt is built from --------------------------------------------------------


def forget_in_state(values: Mapping[str, Any], forgot: Forgotten) -> dict[str, Any]:
    """The graph-state update that makes the next prompt agree with the scrubbed records: the paging
    state's bookmarks, terms, digests and sketch, and (as `add_messages` replacements by id) the
    messages that show a changed page or cluster, a recall result that carried a changed page, and
    the forgotten message itself if it is still in the state. {} when nothing changes."""
    value = values.get(STATE_KEY)
    state = PagingState.from_value(value)
    pages = {p.id: p for p in forgot.pages}
    nodes = {n.id: n for n in [*forgot.above, *forgot.nodes]}
    ids = {forgot.message_id, *forgot.earlier}
    lost = set(forgot.gone)
    for pid, page in pages.items():
        _scrub_page_entries(state, pid, page, lost)
    _scrub_cluster_roots(state, nodes, lost)
    state.doc_freq = {t: n for t, n in state.doc_freq.items() if not _is_gone(t, lost)}
    _scrub_skeleton(state, pages, nodes, ids)
    if forgot.generation is not None:
        state.lifecycle = forgot.generation
    replaced = [
        new
        for m in values.get("messages") or []
        if (new := _scrubbed_message(m, state, pages, nodes, ids)) is not None
    ]
    update: dict[str, Any] = {}
    new_value = state.to_value()
    if value and new_value != value:
        update[STATE_KEY] = new_value
    if replaced:
        update["messages"] = replaced
    return update


def _scrub_page_entries(state: PagingState, pid: str, page: Page, lost: set[str]) -> None:
    """Give page `pid`'s resident and shown entries the scrubbed record's bookmark, terms and digest;
    adds to `lost` the term keys they held that the record no longer does."""
    kept_terms = page.features.get("terms") if isinstance(page.features.get("terms"), dict) else None
    entries: list[ResidentPage | ShownPage] = [e for e in (state.pages.get(pid), state.shown.get(pid)) if e]
    for entry in entries:
        lost |= _dropped(entry.terms, kept_terms)
        entry.terms = (
            _kept_terms(entry.terms, lost)
            if kept_terms is None
            else {t: w for t, w in entry.terms.items() if t in kept_terms}
        )
        entry.bookmark = page.bookmark
    if pid in state.pages:
        state.pages[pid].digest = page.digest
    if pid in state.shown and state.shown[pid].tier == "warm":
        state.shown[pid].tier = "cold"  # its digest quoted the page: the next step may digest it again


def _scrub_cluster_roots(state: PagingState, nodes: Mapping[str, ClusterNode], lost: set[str]) -> None:
    """Give each shown cluster root its scrubbed node's bookmark and terms; adds dropped keys to `lost`."""
    for cid, node in nodes.items():
        if cid in state.clusters:
            root = state.clusters[cid]
            lost |= _dropped(root.terms, node.terms)
            root.text, root.terms = node.bookmark, {t: w for t, w in root.terms.items() if t in node.terms}


def _scrub_skeleton(
    state: PagingState, pages: Mapping[str, Page], nodes: Mapping[str, ClusterNode], ids: set[str]
) -> None:
    """Replace, in place, the skeleton's stored messages that show what changed."""
    if state.skeleton is None:
        return
    for i, entry in enumerate(state.skeleton):
        if isinstance(entry, dict):
            new = _scrubbed_message(load_messages([entry])[0], state, pages, nodes, ids)
            if new is not None:
                state.skeleton[i] = dump_messages([new])[0]


def _scrubbed_message(
    message: BaseMessage,
    state: PagingState,
    pages: Mapping[str, Page],
    nodes: Mapping[str, ClusterNode],
    ids: set[str],
) -> BaseMessage | None:
    """What `message` becomes once the records are scrubbed (None: it stays as it is)."""
    # (a stand-in takes the id of its page's first message: the library's marks are read first)
    mark = library_mark(message)
    if mark.get("bookmark") is not None:
        return _changed(message, _rebookmarked(mark["bookmark"], state, pages, message.id or ""))
    if mark.get("cluster") is not None:
        cid = mark["cluster"]
        return _changed(
            message, cluster_message(cid, nodes[cid].bookmark, message.id or "") if cid in nodes else None
        )
    if isinstance(message, ToolMessage) and (shown := recall_copy_shown(message)):
        stale = not mark.get("shrunk") and not set(shown).isdisjoint(pages)
        return shrink_recall_copy(message) if stale else None
    if message.id in ids and not mark.get("forgotten") and not mark.get("paged_result"):
        return tombstone(message)
    return None


def _rebookmarked(
    page_id: str, state: PagingState, pages: Mapping[str, Page], message_id: str
) -> BaseMessage | None:
    """The bookmark message of a scrubbed page shown by a bookmark (None: not changed)."""
    if page_id not in pages or page_id not in state.shown:
        return None
    return bookmark_message(page_id, state.shown[page_id].bookmark, message_id)


def _changed(message: BaseMessage, new: BaseMessage | None) -> BaseMessage | None:
    """`new`, unless it says what `message` says already."""
    return new if new is not None and new.content != message.content else None


def _dropped(terms: Mapping[str, float], kept: Mapping[str, float] | None) -> set[str]:
    """Term keys an entry held that its scrubbed record does not (what a re-run must still remove)."""
    if kept is None:
        return set()
    return {k for t in terms if t not in kept for k in term_keys(t)}


def merged_messages(messages: Sequence[BaseMessage], replaced: Sequence[BaseMessage]) -> list[BaseMessage]:
    """`messages` with `replaced` put in place by id (what `add_messages` does with them)."""
    by_id = {m.id: m for m in replaced}
    return [by_id.get(m.id, m) for m in messages]
