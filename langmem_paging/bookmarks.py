"""Bookmarks: the tiny ``[pN:kw1,kw2,...]`` that stands where an evicted page was.

A `Bookmarker` makes bookmarks for a batch of pages (sync `bookmark`, async
`abookmark`; an LLM-written bookmarker awaits its model there). The default
`KeywordBookmarker` picks the words that tell a page apart from the pages around
it: names, numbers and dates first, then rare terms. It is deterministic: the same
page in the same context gives the same bookmark byte for byte, and a bookmark is
never rewritten once formed (prompt caches stay valid).
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage

from langmem_paging.background import stem
from langmem_paging.keywords import PageTerms, page_terms, score_terms
from langmem_paging.library_messages import bookmark_safe, format_bookmark
from langmem_paging.messages import speaker

__all__ = [
    "BOOKMARKERS",
    "Bookmark",
    "BookmarkContext",
    "Bookmarker",
    "DiscriminativeBookmarker",
    "KeywordBookmarker",
    "PageDraft",
    "as_bookmarker",
]

TERMS_KEPT = 24
"""Weighted terms a bookmark keeps for similarity (more than it shows)."""


@dataclass(frozen=True)
class PageDraft:
    """A page being formed, as a bookmarker sees it."""

    id: str
    """Its page id (``p7``)."""
    messages: Sequence[BaseMessage]
    """Its messages, as they will be stored."""


@dataclass(frozen=True)
class Bookmark:
    """A bookmarker's answer for one page."""

    text: str
    """The bookmark as the model reads it, ``[p7:Farid,greyhound,adoption]``."""
    keywords: list[str]
    """Its keywords, most distinctive first: those the bookmark shows, then more kept with the page."""
    terms: dict[str, float] = field(default_factory=dict)
    """The page's strongest terms with weights (clusters compare pages by these)."""


@dataclass(frozen=True)
class BookmarkContext:
    """What a bookmarker may know besides the pages."""

    count_text: Callable[[str], int]
    """Counts tokens of a string with the paging tokenizer."""
    doc_freq: Mapping[str, int] = field(default_factory=dict)
    """In how many of the neighbouring pages (formed now, or shown in the context) each term
    occurs, by stem (`langmem_paging.text.search_terms`)."""
    n_docs: int = 0
    """How many neighbouring pages `doc_freq` counts."""


class Bookmarker(ABC):
    """Makes bookmarks for a batch of pages; must be deterministic for a given page and context."""

    @abstractmethod
    def bookmark(self, pages: Sequence[PageDraft], context: BookmarkContext) -> list[Bookmark]:
        """One `Bookmark` per page, in order."""

    async def abookmark(self, pages: Sequence[PageDraft], context: BookmarkContext) -> list[Bookmark]:
        """Async `bookmark`; by default the sync one (override to await a model)."""
        return self.bookmark(pages, context)


class _CallableBookmarker(Bookmarker):
    """Adapts a function ``(page_id, messages, context) -> (text, keywords)``."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def bookmark(self, pages, context):
        out = []
        for page in pages:
            text, keywords = self.fn(page.id, page.messages, context)
            out.append(Bookmark(text, list(keywords), dict.fromkeys(keywords, 1.0)))
        return out

    async def abookmark(self, pages, context):
        if asyncio.iscoroutinefunction(self.fn):
            out = []
            for page in pages:
                text, keywords = await self.fn(page.id, page.messages, context)
                out.append(Bookmark(text, list(keywords), dict.fromkeys(keywords, 1.0)))
            return out
        return self.bookmark(pages, context)


def as_bookmarker(value: Bookmarker | Callable | str | None) -> Bookmarker:
    """A `Bookmarker` from one, from its name (`BOOKMARKERS`), from a ``(page_id, messages,
    context) -> (text, keywords)`` function, or the default `KeywordBookmarker` for None."""
    if value is None:
        return KeywordBookmarker()
    if isinstance(value, Bookmarker):
        return value
    if isinstance(value, str):
        if value in BOOKMARKERS:
            return BOOKMARKERS[value]()
        available = ", ".join(repr(name) for name in BOOKMARKERS)
        raise ValueError(
            f"Unknown bookmarker {value!r}. Available: {available}, a Bookmarker instance (e.g. "
            "LLMBookmarker(model)), or a function (page_id, messages, context) -> (text, keywords)."
        )
    if callable(value):
        return _CallableBookmarker(value)
    raise TypeError(
        f"`bookmarker` must be a name, a Bookmarker or a function (page_id, messages, context) -> "
        f"(text, keywords); got {type(value).__name__}."
    )


class KeywordBookmarker(Bookmarker):
    """Distinctive keywords that fit in `min_tokens`..`max_tokens` tiktoken tokens (the default).

    Terms are scored by `langmem_paging.keywords.score_terms`: frequent on the page, rare among
    its neighbours, names/numbers/dates first, grouped by stem. The bookmark shows the best
    that fit; the page keeps its `stored_keywords` best (shown when a cluster is listed).

    Args:
        min_tokens: Shortest bookmark; short pages are padded with speakers and size.
        max_tokens: Longest bookmark.
        max_keywords: Most keywords in one bookmark.
        stored_keywords: Keywords kept with the page (cluster listings show them).
        background: Also weigh terms by their rarity in English (`langmem_paging.background`).
            Off by default: on LoCoMo it lowered page selection (see the README).

    Example:
        >>> from langchain_core.messages import HumanMessage, AIMessage
        >>> from langmem_paging.tokens import TokenCounter
        >>> page = PageDraft("p3", [HumanMessage("Caroline adopted a dog named Bailey in May 2023.", id="m1"),
        ...                         AIMessage("Bailey sounds lovely!", id="m2")])
        >>> ctx = BookmarkContext(count_text=TokenCounter().count_text)
        >>> KeywordBookmarker().bookmark([page], ctx)[0].text
        '[p3:Bailey,2023,May,adopted,Caroline,dog,named]'
    """

    name = "keywords"

    def __init__(self, *, min_tokens: int = 8, max_tokens: int = 24, max_keywords: int = 8,
                 stored_keywords: int = 16, background: bool = False) -> None:
        if not 1 <= min_tokens <= max_tokens:
            raise ValueError("`min_tokens` must be at least 1 and at most `max_tokens`.")
        self.min_tokens = min_tokens
        self.max_tokens = max_tokens
        self.max_keywords = max_keywords
        self.stored_keywords = max(stored_keywords, max_keywords)
        self.background = background

    def bookmark(self, pages: Sequence[PageDraft], context: BookmarkContext) -> list[Bookmark]:
        return [self._one(page, context) for page in pages]

    def _scored(self, terms: PageTerms, context: BookmarkContext) -> list[tuple[str, float]]:
        return score_terms(terms, context.doc_freq, context.n_docs, background=self.background)

    def _one(self, page: PageDraft, context: BookmarkContext) -> Bookmark:
        scored = self._scored(page_terms(page.messages), context)
        chosen: list[str] = []
        seen: set[str] = set()

        def fits(extra: str) -> bool:
            return context.count_text(format_bookmark(page.id, [*chosen, extra])) <= self.max_tokens

        misses = 0
        for form, _ in scored:
            if len(chosen) >= self.max_keywords or misses >= 6:  # full, or nearly: stop trying
                break
            if form.lower() in seen:
                continue
            if fits(form):
                chosen.append(form)
                seen.add(form.lower())
                misses = 0
            else:
                misses += 1
        fillers = [bookmark_safe(speaker(m)) for m in page.messages] + [f"{len(page.messages)}msgs", "page"]
        for filler in fillers:
            if context.count_text(format_bookmark(page.id, chosen)) >= self.min_tokens:
                break
            if filler and filler.lower() not in seen and fits(filler):
                chosen.append(filler)
                seen.add(filler.lower())
        stored = chosen + [f for f, _ in scored if f.lower() not in seen][: self.stored_keywords - len(chosen)]
        return Bookmark(format_bookmark(page.id, chosen), stored, dict(scored[:TERMS_KEPT]))


class DiscriminativeBookmarker(KeywordBookmarker):
    """Keywords that separate a page from its neighbours (the pages formed with it, the
    bookmarks and clusters in the context): terms no neighbour has come first, whatever
    their frequency on the page; terms many neighbours share are dropped.

    Same arguments as `KeywordBookmarker`.
    """

    name = "discriminative"

    def _scored(self, terms: PageTerms, context: BookmarkContext) -> list[tuple[str, float]]:
        scored = []
        for form, score in score_terms(terms, context.doc_freq, context.n_docs, salience=1.5,
                                       background=self.background):
            key = form.lower() if form[:1].isdigit() else stem(form.lower())
            shared = context.doc_freq.get(key, 0)
            if context.n_docs > 1 and shared > max(1, context.n_docs // 2):
                continue  # most neighbours have it: it cannot tell them apart
            scored.append((form, score / (1 + shared)))
        scored.sort(key=lambda fs: (-fs[1], fs[0].lower()))
        return scored


BOOKMARKERS: dict[str, Callable[[], Bookmarker]] = {
    "keywords": KeywordBookmarker,
    "discriminative": DiscriminativeBookmarker,
}
"""Bookmark strategies by name (an LLM-written one is `langmem_paging.llm_bookmarks.LLMBookmarker`)."""
