"""Where a thread's text still lives: every place a page leaves it (`langmem-paging where`).

A page lives in its store record (messages, bookmark, keywords, terms), the cluster bookmarks above
it, the thread's keyword sketch (a store record; in the state of a checkpoint written before it moved
there), the search index, and the checkpointed state (bookmarks, cluster bookmarks, the messages and
the view skeleton). After `forget` or `delete`, this lists what is left; the README's
verification recipe runs it with the forgotten text and expects nothing.

Text fields (messages, bookmarks) match when they hold the text (case-insensitive); term fields
(keywords, term weights, the sketch) when they hold one of its words or stems; the index when one
passage holds every word of the text (searched word by word through the `SearchIndex` API).

Example:
    >>> from langgraph.store.memory import InMemoryStore
    >>> from langchain_core.messages import HumanMessage
    >>> from langmem_paging.core.records import Page
    >>> from langmem_paging.index.base import InMemoryBM25Index
    >>> from langmem_paging.storage.page_store import PageStore
    >>> pages = PageStore(InMemoryStore())
    >>> pages.put("t", Page(id="p1", messages=[HumanMessage("card 4111 1111", id="m1")], bookmark="[p1:card,4111]",
    ...                     keywords=["card", "4111"], token_count=5, boundary="fixed_2", created_turn=1))
    >>> [(p.place, p.where) for p in where_text(pages, "t", "4111 1111", index=InMemoryBM25Index())]
    [('page message', 'p1 m1'), ('page bookmark', 'p1'), ('page keywords', 'p1'), ('index row', 'p1 #0')]
    >>> {p.held_by for p in where_text(pages, "t", "4111 1111", index=InMemoryBM25Index())}
    {'p1 m1'}
    >>> _ = pages.forget("t", "m1")
    >>> where_text(pages, "t", "4111 1111", index=InMemoryBM25Index())
    []
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from langchain_core.messages import BaseMessage

from langmem_paging.core.messages import load_messages
from langmem_paging.core.records import ClusterNode, Page
from langmem_paging.core.state import PagingState, ResidentPage, ShownPage
from langmem_paging.core.text import search_terms
from langmem_paging.core.tokens import message_text
from langmem_paging.index.base import SearchIndex
from langmem_paging.storage.lifecycle import term_keys, vocabulary
from langmem_paging.storage.page_store import PageStore

__all__ = ["Place", "where_text"]

_INDEX_LIMIT = 10_000


@dataclass
class Place:
    """One place that still holds the text (or one of its words)."""

    place: str
    """What kind of place: ``page message``, ``page bookmark``, ``page keywords``, ``page terms``,
    ``cluster bookmark``, ``cluster terms``, ``store sketch``, ``index row``, ``state bookmark``, ``state cluster``,
    ``state terms``, ``state sketch``, ``state message``."""
    where: str
    """Which one: a page or cluster id (and message id or passage position)."""
    excerpt: str
    """What it holds there (cut to 120 characters)."""
    held_by: str = ""
    """The stored messages that still hold the text or one of its words, as ``page-id message-id``
    (comma-separated): what keeps this place holding it. A word another message quoted stays with
    that message when the one that said it is forgotten; forget that one too if it must go."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe."""
        return asdict(self)


def _cut(text: str) -> str:
    return text if len(text) <= 120 else text[:117] + "..."


def _holds(text: str, needle: str) -> bool:
    return needle.lower() in text.lower()


def _terms_hit(terms: Iterable[str], words: set[str]) -> list[str]:
    return [t for t in terms if not term_keys(t).isdisjoint(words)]


def where_text(
    page_store: PageStore,
    thread_id: str,
    text: str,
    *,
    index: SearchIndex | None = None,
    paging: Mapping[str, Any] | None = None,
    messages: Sequence[BaseMessage] = (),
) -> list[Place]:
    """Every place of thread `thread_id` that still holds `text` (see the module docstring).

    Args:
        page_store: The thread's store.
        thread_id: The thread.
        text: What to look for (a card number, a name).
        index: The search index to look in (None: not looked in).
        paging: The latest checkpoint's paging state value (None: no state looked in).
        messages: The latest checkpoint's messages.
    """
    words = vocabulary([text])
    pages = page_store.list_pages(thread_id)
    holders = {page.id: _holders(page, text, words) for page in pages}
    anywhere = ", ".join(h for found in holders.values() for h in found)
    out = [place for page in pages for place in _page_places(page, text, words, ", ".join(holders[page.id]))]
    out += _cluster_places(page_store.list_clusters(thread_id), text, words, anywhere)
    sketch = page_store.get_sketch(thread_id)
    if sketch is not None and (hit := _terms_hit(sketch.doc_freq, words)):
        out.append(Place("store sketch", "sketch", ",".join(hit), anywhere))
    if index is not None:
        out += _index_rows(page_store, thread_id, text, index, {p.id: p for p in pages})
    if paging:
        out += _state_places(PagingState.from_value(dict(paging)), words, text)
    return out + [
        Place("state message", str(m.id), _cut(message_text(m)))
        for m in messages
        if _holds(message_text(m), text)
    ]


def _holders(page: Page, text: str, words: set[str]) -> list[str]:
    """The page's messages holding `text` or one of its words, as ``"<page id> <message id>"``."""
    return [
        f"{page.id} {m.id}"
        for m in page.messages
        if _holds(message_text(m), text) or not vocabulary([message_text(m)]).isdisjoint(words)
    ]


def _cluster_places(nodes: Iterable[ClusterNode], text: str, words: set[str], held: str) -> list[Place]:
    out = []
    for node in nodes:
        if _holds(node.bookmark, text) or _terms_hit(node.keywords, words):
            out.append(Place("cluster bookmark", node.id, node.bookmark, held))
        if hit := _terms_hit(node.terms, words):
            out.append(Place("cluster terms", node.id, ",".join(hit), held))
    return out


def _page_places(page: Page, text: str, words: set[str], held: str) -> list[Place]:
    out = [
        Place("page message", f"{page.id} {m.id}", _cut(message_text(m)), f"{page.id} {m.id}")
        for m in page.messages
        if _holds(message_text(m), text)
    ]
    if _holds(page.bookmark, text) or _terms_hit(page.bookmark.strip("[]").split(","), words):
        out.append(Place("page bookmark", page.id, page.bookmark, held))
    if hit := _terms_hit(page.keywords, words):
        out.append(Place("page keywords", page.id, ",".join(hit), held))
    if hit := _terms_hit((page.features.get("terms") or {}).keys(), words):
        out.append(Place("page terms", page.id, ",".join(hit), held))
    return out


def _index_rows(
    page_store: PageStore, thread_id: str, text: str, index: SearchIndex, pages: Mapping[str, Page]
) -> list[Place]:
    """Passages holding every word of `text`: one search per word, intersected."""
    if not index.has(thread_id):  # read first, then write: no index lock held across a store read
        index.load(thread_id, page_store.list_pages(thread_id))
    found: set[tuple[str, int]] | None = None
    for term in dict.fromkeys(search_terms(text)):
        hits = {
            (h.page_id, h.index)
            for h in index.search(thread_id, term, limit=_INDEX_LIMIT, allow=lambda p: True)
        }
        found = hits if found is None else found & hits
    return [
        Place("index row", f"{pid} #{pos}", text, _message_at(pages, pid, pos))
        for pid, pos in sorted(found or ())
    ]


def _message_at(pages: Mapping[str, Page], page_id: str, position: int) -> str:
    page = pages.get(page_id)
    if page is None or position >= len(page.messages):
        return f"{page_id} (no such stored message: a stale index row)"
    return f"{page_id} {page.messages[position].id}"


def _state_places(state: PagingState, words: set[str], text: str) -> list[Place]:
    out: list[Place] = []
    entries: list[tuple[str, ResidentPage | ShownPage]] = [*state.pages.items(), *state.shown.items()]
    for pid, entry in entries:
        if _holds(entry.bookmark, text) or _terms_hit(entry.bookmark.strip("[]").split(","), words):
            out.append(Place("state bookmark", pid, entry.bookmark))
        if hit := _terms_hit(entry.terms, words):
            out.append(Place("state terms", pid, ",".join(hit)))
    for cid, cluster in state.clusters.items():
        if _holds(cluster.text, text) or _terms_hit(cluster.text.strip("[]").split("|")[0].split(","), words):
            out.append(Place("state cluster", cid, cluster.text))
        if hit := _terms_hit(cluster.terms, words):
            out.append(Place("state terms", cid, ",".join(hit)))
    if hit := _terms_hit(state.doc_freq, words):
        out.append(Place("state sketch", "doc_freq", ",".join(hit)))
    for entry in state.skeleton or []:
        if isinstance(entry, dict):
            (message,) = load_messages([entry])
            if _holds(message_text(message), text):
                out.append(Place("state message", f"skeleton {message.id}", _cut(message_text(message))))
    return out
