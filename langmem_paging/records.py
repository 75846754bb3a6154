"""Records: a stored page, and the per-thread ledger of how the history is paged."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from langmem_paging.messages import dump_messages, load_messages

__all__ = ["Ledger", "Page", "PageEntry", "page_number"]


def page_number(page_id: str) -> int:
    """``"p12"`` -> 12; raises ValueError for anything else."""
    if not (isinstance(page_id, str) and page_id[:1] == "p" and page_id[1:].isdigit()):
        raise ValueError(f"not a page id: {page_id!r}")
    return int(page_id[1:])


@dataclass
class Page:
    """One evicted page, whole and exact, as the page store keeps it."""

    id: str
    """Page id, ``p1``, ``p2``, ...: per thread, never reused."""
    messages: list[BaseMessage]
    """The page's messages exactly as they were (ids, content blocks, tool calls, metadata).
    A `recall` result inside the page is kept as a reference to the pages it copied
    (see `langmem_paging.recall.expand_recall_copies`), never as a second copy."""
    bookmark: str
    """The bookmark that stands in the context where the page was, ``[p3:kw1,kw2]``."""
    keywords: list[str]
    """The bookmark's keywords, most distinctive first."""
    token_count: int
    """Tokens of the page's messages when it was evicted."""
    boundary: str
    """Name of the boundary strategy that cut the page."""
    created_turn: int
    """User turn in which the page was formed."""
    last_access: int = 0
    """User turn of the latest recall (``created_turn`` until recalled)."""
    access_count: int = 0
    """How many times `recall` returned this page."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict for a LangGraph store."""
        data = asdict(self)
        data["messages"] = dump_messages(self.messages)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Page:
        """Inverse of `to_dict`."""
        return cls(**{**data, "messages": load_messages(data["messages"])})


@dataclass
class PageEntry:
    """The ledger's line for one page, resident or evicted."""

    id: str
    """Page id."""
    message_ids: list[str]
    """Ids of the page's messages, in order; the first one carries the bookmark once evicted."""
    tokens: int
    """Tokens of the page's messages."""
    created_turn: int
    """User turn in which the page was formed."""
    last_access: int
    """User turn of the latest use: formation, then each recall."""
    access_count: int = 0
    """Recalls of this page."""
    evicted: bool = False
    """True once the page lives in the store and a bookmark stands in its place."""
    bookmark: str | None = None
    """The bookmark text, set at eviction and never regenerated (prompt caches stay valid)."""


@dataclass
class Ledger:
    """Everything paging remembers about one thread, stored beside its pages.

    The context the model sees is always ``apply_ledger(messages, ledger)``: the
    same function serves state that already holds bookmarks (replace mode) and
    state that keeps the full history (view mode).
    """

    next_page: int = 1
    """Number of the next page id; ids are never reused, also across restarts."""
    turn: int = 0
    """Count of user turns seen, the clock of LRU and LFU."""
    last_user_message_id: str | None = None
    """Id of the newest user message seen, to advance `turn` once per user turn."""
    pages: list[PageEntry] = field(default_factory=list)
    """Every page formed so far, in history order."""
    shrunk_copies: list[str] = field(default_factory=list)
    """Ids of `recall` ToolMessages whose text was shrunk back to a page reference."""
    doc_freq: dict[str, int] = field(default_factory=dict)
    """In how many formed pages each term occurs (IDF for bookmarks and the semantic policy)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict for a LangGraph store."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Ledger:
        """Inverse of `to_dict`."""
        pages = [PageEntry(**p) for p in data.get("pages", [])]
        return cls(**{**data, "pages": pages})

    def entry(self, page_id: str) -> PageEntry | None:
        """The ledger line of a page, or None."""
        for page in self.pages:
            if page.id == page_id:
                return page
        return None

    def record_access(self, page_ids: list[str]) -> None:
        """Count one recall of each page (LRU and LFU read these)."""
        for page_id in page_ids:
            page = self.entry(page_id)
            if page is not None:
                page.access_count += 1
                page.last_access = self.turn
