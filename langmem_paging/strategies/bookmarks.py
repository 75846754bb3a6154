"""Bookmarks: the tiny ``[pN:kw1 kw2 ...]`` that stands where an evicted page was.

A `Bookmarker` makes bookmarks for a batch of pages (sync `bookmark`, async
`abookmark`; an LLM-written bookmarker awaits its model there). The default
(`DEFAULT_BOOKMARKER`, ``"compact"``) is a `KeywordBookmarker` showing its words space-separated,
``[p3:Bailey adopted dog,May]``; ``"keywords"`` is the comma form, ``[p3:Bailey,adopted,dog,May]``.
`KeywordBookmarker` picks the words that tell a page apart from the thread's other
pages: never a participant's name (every page of the thread has one), at most one date, at
least one topic word. It is deterministic: the same
page in the same context gives the same bookmark byte for byte, and a bookmark is
never rewritten once formed (prompt caches stay valid).
"""

from __future__ import annotations

import asyncio
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import Literal, NamedTuple, TypeAlias, cast

from langchain_core.messages import BaseMessage

from langmem_paging.core.background import stem
from langmem_paging.core.library_messages import format_bookmark, parse_bookmark
from langmem_paging.strategies.keywords import MONTHS, PageTerms, is_date, page_terms, score_terms

__all__ = [
    "BOOKMARKERS",
    "DEFAULT_BOOKMARKER",
    "Bookmark",
    "BookmarkContext",
    "Bookmarker",
    "DiscriminativeBookmarker",
    "KeywordBookmarker",
    "PageDraft",
    "as_bookmarker",
    "render_bookmark",
    "shown_keywords",
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
    """The bookmark as the model reads it, ``[p7:Farid greyhound adoption]``."""
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
    occurs, by stem (`langmem_paging.core.text.search_terms`)."""
    n_docs: int = 0
    """How many neighbouring pages `doc_freq` counts."""
    participants: frozenset[str] = frozenset()
    """Names of the thread's participants besides those on the page's messages (their ``name``),
    lower-cased: never keywords, since every page of the thread would carry them."""


class Bookmarker(ABC):
    """Makes bookmarks for a batch of pages; must be deterministic for a given page and context."""

    max_tokens: int = 24
    """The longest bookmark it makes, in tokens (a recall sets this much aside per new bookmark)."""

    @abstractmethod
    def bookmark(self, pages: Sequence[PageDraft], context: BookmarkContext) -> list[Bookmark]:
        """One `Bookmark` per page, in order."""

    async def abookmark(self, pages: Sequence[PageDraft], context: BookmarkContext) -> list[Bookmark]:
        """Async `bookmark`; by default the sync one (override to await a model)."""
        return self.bookmark(pages, context)


BookmarkText: TypeAlias = tuple[str, Iterable[str]]
"""A bookmark function's answer: the bookmark's text and its keywords."""
BookmarkFunction: TypeAlias = Callable[
    [str, Sequence[BaseMessage], "BookmarkContext"], BookmarkText | Awaitable[BookmarkText]
]
"""A user's bookmarker: ``(page_id, messages, context) -> (text, keywords)``, sync or async."""


class _CallableBookmarker(Bookmarker):
    """Adapts a function ``(page_id, messages, context) -> (text, keywords)``."""

    def __init__(self, fn: BookmarkFunction) -> None:
        self.fn = fn

    def bookmark(self, pages: Sequence[PageDraft], context: BookmarkContext) -> list[Bookmark]:
        out = []
        for page in pages:
            # a sync function here: `abookmark` awaits an async one
            text, keywords = cast("BookmarkText", self.fn(page.id, page.messages, context))
            out.append(Bookmark(text, list(keywords), dict.fromkeys(keywords, 1.0)))
        return out

    async def abookmark(self, pages: Sequence[PageDraft], context: BookmarkContext) -> list[Bookmark]:
        if asyncio.iscoroutinefunction(self.fn):
            out = []
            for page in pages:
                # iscoroutinefunction does not narrow the union: an async function returns an awaitable
                text, keywords = await cast(
                    "Awaitable[BookmarkText]", self.fn(page.id, page.messages, context)
                )
                out.append(Bookmark(text, list(keywords), dict.fromkeys(keywords, 1.0)))
            return out
        return self.bookmark(pages, context)


def as_bookmarker(value: Bookmarker | BookmarkFunction | str | None) -> Bookmarker:
    """A `Bookmarker` from one, from its name (`BOOKMARKERS`), from a ``(page_id, messages,
    context) -> (text, keywords)`` function, or the default (`DEFAULT_BOOKMARKER`) for None."""
    if value is None:
        return BOOKMARKERS[DEFAULT_BOOKMARKER]()
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


_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}
_NAME_SPLIT = re.compile(r"[\W_]+")


class _Candidate(NamedTuple):
    """A term that may be shown."""

    form: str
    """Its surface form."""
    score: float
    """Its score, higher first."""
    kind: str
    """``date``, ``number``, ``name`` (written as one) or ``topic`` (any other word)."""


def participants(messages: Sequence[BaseMessage], context: BookmarkContext) -> frozenset[str]:
    """The lower-cased name parts of everyone who speaks on the page (each message's ``name``) and
    of the thread's known participants (``Maria Lopez`` gives ``maria`` and ``lopez``)."""
    names = {
        part for m in messages if m.name for part in _NAME_SPLIT.split(str(m.name).lower()) if len(part) > 1
    }
    return frozenset(
        names | {p for name in context.participants for p in _NAME_SPLIT.split(name.lower()) if p}
    )


def _is_participant(form: str, names: frozenset[str]) -> bool:
    """A participant's name, or a capitalized short form of it (``Mel`` for Melanie)."""
    lower = form.lower()
    return (
        lower in names or form[:1].isupper() and len(lower) >= 3 and any(n.startswith(lower) for n in names)
    )


class KeywordBookmarker(Bookmarker):
    """Distinctive keywords that fit in `min_tokens`..`max_tokens` tiktoken tokens (the default
    bookmarker is this class with ``separator=" "``, ``"compact"``; ``"keywords"`` is the comma form).

    Terms are scored by `langmem_paging.strategies.keywords.score_terms`: frequent on the page, rare among
    the thread's pages (so a word most pages share loses to one only this page has, however
    rare in English), names a little higher, grouped by stem. Three rules make the bookmark
    something a model can choose by:

    - no participant's name (the ``name`` of any message on the page, and
      `BookmarkContext.participants`): every page of the thread carries them;
    - at most one date (the most specific: a day with its month before a month, a year or a
      weekday): the page's session date says when, more dates say nothing about what;
    - at least one topic word (not a name, a number or a date) when the page has one.

    The bookmark shows the best that fit, the date last (`render_bookmark`): comma-separated,
    ``[p3:Bailey,adopted,dog,named,May]``, with the class's ``separator=","`` (the ``"keywords"``
    bookmarker); with ``separator=" "`` (the ``"compact"`` bookmarker, the default) the words space-separated and the date after a comma, ``[p3:Bailey adopted dog
    named,May]``: a comma costs a token, so the same tokens show about twice the words (on LoCoMo
    dev the bookmark-only reader's top-1 at B=4000 rose from 0.268 to 0.330, see
    docs/evaluation.md). The page keeps its `stored_keywords` best under the same rules (shown when a
    cluster is listed), and its weighted terms without dates (clusters compare and show pages by
    these: a cluster spans many dates).

    Args:
        min_tokens: Shortest bookmark; short pages are padded with their roles and size.
        max_tokens: Longest bookmark (default 24; 23 with ``separator=" "``: with 24, LoCoMo's
            longer threads at B=4000 passed the bookmark share by a few tokens and folded most
            pages into clusters, which the model then chooses among far worse: top-1 0.270
            against 0.330 at 23, measured side by side).
        max_keywords: Most keywords in one bookmark (default 12; 24 with ``separator=" "``).
        separator: ``","`` (the documented ``[pN:kw1,kw2,...]``) or ``" "`` (compact: more words
            in the same tokens; a page's term counts then weigh linearly, see `score_terms`).
        stored_keywords: Keywords kept with the page (cluster listings show them).
        background: Also weigh terms by their rarity in English (`langmem_paging.core.background`).
            Off by default: on LoCoMo it lowered page selection (see the README).

    Example:
        >>> from langchain_core.messages import HumanMessage, AIMessage
        >>> from langmem_paging.core.tokens import TokenCounter
        >>> page = PageDraft("p3", [
        ...     HumanMessage("I adopted a dog named Bailey in May 2023, Mel!", id="m1", name="Caroline"),
        ...     AIMessage("Bailey sounds lovely, Caroline!", id="m2", name="Melanie")])
        >>> ctx = BookmarkContext(count_text=TokenCounter().count_text)
        >>> KeywordBookmarker().bookmark([page], ctx)[0].text
        '[p3:Bailey,adopted,dog,named,May]'
        >>> KeywordBookmarker(separator=" ").bookmark([page], ctx)[0].text
        '[p3:Bailey adopted dog named,May]'
    """

    name = "keywords"

    def __init__(
        self,
        *,
        min_tokens: int = 8,
        max_tokens: int | None = None,
        max_keywords: int | None = None,
        stored_keywords: int = 16,
        background: bool = False,
        separator: Literal[",", " "] = ",",
    ) -> None:
        if separator not in (",", " "):
            raise ValueError(f'`separator` must be "," or " ", got {separator!r}.')
        compact = separator == " "
        max_tokens = max_tokens if max_tokens is not None else (23 if compact else 24)
        max_keywords = max_keywords if max_keywords is not None else (24 if compact else 12)
        if not 1 <= min_tokens <= max_tokens:
            raise ValueError("`min_tokens` must be at least 1 and at most `max_tokens`.")
        self.separator = separator
        self.min_tokens = min_tokens
        self.max_tokens = max_tokens
        self.max_keywords = max_keywords
        self.stored_keywords = max(stored_keywords, max_keywords)
        self.background = background

    def bookmark(self, pages: Sequence[PageDraft], context: BookmarkContext) -> list[Bookmark]:
        return [self._one(page, context) for page in pages]

    def _scored(self, terms: PageTerms, context: BookmarkContext) -> list[tuple[str, float]]:
        return score_terms(
            terms,
            context.doc_freq,
            context.n_docs,
            background=self.background,
            linear_tf=self.separator == " ",
        )

    def _candidates(self, page: PageDraft, terms: PageTerms, context: BookmarkContext) -> list[_Candidate]:
        """The scored terms a bookmark may show, best first: no participant, one date."""
        keys = {terms.form(key): key for key in terms.tf}
        names = participants(page.messages, context)
        out: list[_Candidate] = []
        for form, score in self._scored(terms, context):
            key = keys[form]
            kind = (
                "date"
                if is_date(form.lower())
                else "number"
                if key[:1].isdigit()
                else "name"
                if key in terms.salient
                else "topic"
            )
            if kind in ("name", "topic") and _is_participant(form, names):
                continue
            out.append(_Candidate(form, score, kind))
        dates = [c for c in out if c.kind == "date"]
        if dates:
            best = min(dates, key=lambda c: (_date_rank(c.form), -c.score))
            out = [c for c in out if c.kind != "date" or c is best]
        return out

    def _one(self, page: PageDraft, context: BookmarkContext) -> Bookmark:
        candidates = self._candidates(page, page_terms(page.messages), context)
        chosen = self._fit(page.id, candidates, context)
        if not any(c.kind == "topic" for c in chosen):
            chosen = self._with_topic(page.id, chosen, candidates, context)
        shown = [c.form for c in chosen]
        seen = {form.lower() for form in shown}
        roles = dict.fromkeys(_ROLES.get(m.type, m.type) for m in page.messages)
        for filler in [*roles, f"{len(page.messages)}msgs", "page"]:
            if context.count_text(render_bookmark(page.id, shown, self.separator)) >= self.min_tokens:
                break
            if filler.lower() not in seen and self._fits(page.id, [*shown, filler], context):
                shown.append(filler)
                seen.add(filler.lower())
        shown = sorted(shown, key=_is_date_form)  # as `render_bookmark` shows them: words, then the date
        stored = (
            shown
            + [c.form for c in candidates if c.form.lower() not in seen][: self.stored_keywords - len(shown)]
        )
        weights = {c.form: c.score for c in candidates if c.kind != "date"}
        return Bookmark(
            render_bookmark(page.id, shown, self.separator), stored, dict(list(weights.items())[:TERMS_KEPT])
        )

    def _fits(self, page_id: str, forms: list[str], context: BookmarkContext) -> bool:
        return context.count_text(render_bookmark(page_id, forms, self.separator)) <= self.max_tokens

    def _fit(self, page_id: str, candidates: list[_Candidate], context: BookmarkContext) -> list[_Candidate]:
        """The best candidates that fit, in score order."""
        chosen: list[_Candidate] = []
        forms: list[str] = []
        seen: set[str] = set()
        misses = 0
        for candidate in candidates:
            if len(chosen) >= self.max_keywords or misses >= 6:  # full, or nearly: stop trying
                break
            if candidate.form.lower() in seen:
                continue
            if self._fits(page_id, [*forms, candidate.form], context):
                chosen.append(candidate)
                forms.append(candidate.form)
                seen.add(candidate.form.lower())
                misses = 0
            else:
                misses += 1
        return chosen

    def _with_topic(
        self, page_id: str, chosen: list[_Candidate], candidates: list[_Candidate], context: BookmarkContext
    ) -> list[_Candidate]:
        """`chosen` with the page's best topic word in place of its weakest keywords (as few as
        make it fit); unchanged when the page has no topic word that fits."""
        topic = next((c for c in candidates if c.kind == "topic"), None)
        if topic is None:
            return chosen
        for keep in range(min(len(chosen), self.max_keywords - 1), -1, -1):
            if self._fits(page_id, [*(c.form for c in chosen[:keep]), topic.form], context):
                return [*chosen[:keep], topic]
        return chosen


def render_bookmark(page_id: str, forms: Sequence[str], separator: str = ",") -> str:
    """The bookmark text for keywords `forms`, the date last: ``[p3:Bailey,adopted,dog,May]`` with
    ``separator=","``; ``[p3:Bailey adopted dog,May]`` with ``separator=" "``.

    A comma costs a token and splits the next word off its space (``,necklace`` is two or three
    tokens, `` necklace`` one), so a comma-separated list holds about half the words in the same
    tokens: on LoCoMo dev (conversations 0-3) 24 tokens show ~18 words instead of ~9, and the
    bookmark reader's top-3 rose from 0.337 to 0.430 at B=4000. The date keeps its comma: ``25
    May`` inside a run of words would read as two keywords.
    """
    words: list[str] = []
    dates: list[str] = []
    for form in forms:
        (dates if _is_date_form(form) else words).append(form)
    if separator == ",":
        return format_bookmark(page_id, [*words, *dates])
    return format_bookmark(page_id, [" ".join(words)] * bool(words) + dates)


def shown_keywords(text: str) -> list[str]:
    """The keywords a `render_bookmark` bookmark shows, in order (a date as one keyword); [] for
    text that is not a bookmark.

    Example:
        >>> shown_keywords("[p3:Bailey adopted dog,25 May]")
        ['Bailey', 'adopted', 'dog', '25 May']
    """
    parsed = parse_bookmark(text)
    if parsed is None:
        return []
    return [w for group in parsed[1] for w in ([group] if _is_date_form(group) else group.split())]


@lru_cache(maxsize=8192)  # asked for each keyword of each bookmark rendered while one is fitted
def _is_date_form(form: str) -> bool:
    """A date keyword: one date word, or a day with its month (``25 May``), never a run of words."""
    parts = form.split()
    if len(parts) == 2:
        return parts[0].isdigit() and len(parts[0]) <= 2 and parts[1].lower() in MONTHS
    return len(parts) == 1 and is_date(form.lower())


_WEEKDAY_SHORT = frozenset(["tue", "tues", "thu", "thur", "thurs", "fri"])


def _date_rank(form: str) -> int:
    """Most specific first: a day with its month, a numeric date, a month, a year, a weekday."""
    lower = form.lower()
    if " " in lower:
        return 0
    if lower[:1].isdigit():
        return 1 if not lower.isdigit() else 3
    return 4 if lower.endswith("day") or lower in _WEEKDAY_SHORT else 2


class DiscriminativeBookmarker(KeywordBookmarker):
    """Keywords that separate a page from its neighbours (the pages formed with it, the
    bookmarks and clusters in the context): terms no neighbour has come first, whatever
    their frequency on the page; terms many neighbours share are dropped.

    Same arguments as `KeywordBookmarker`.
    """

    name = "discriminative"

    def _scored(self, terms: PageTerms, context: BookmarkContext) -> list[tuple[str, float]]:
        scored = []
        for form, score in score_terms(
            terms,
            context.doc_freq,
            context.n_docs,
            salience=1.5,
            background=self.background,
            linear_tf=self.separator == " ",
        ):
            key = form.lower() if form[:1].isdigit() else stem(form.lower())
            shared = context.doc_freq.get(key, 0)
            if context.n_docs > 1 and shared > max(1, context.n_docs // 2):
                continue  # most neighbours have it: it cannot tell them apart
            scored.append((form, score / (1 + shared)))
        scored.sort(key=lambda fs: (-fs[1], fs[0].lower()))
        return scored


BOOKMARKERS: dict[str, Callable[[], Bookmarker]] = {
    "keywords": KeywordBookmarker,
    "compact": partial(KeywordBookmarker, separator=" "),
    "discriminative": DiscriminativeBookmarker,
}
"""Bookmark strategies by name (an LLM-written one is `langmem_paging.llm_bookmarks.LLMBookmarker`)."""
DEFAULT_BOOKMARKER = "compact"
"""The bookmarker of ``bookmarker=None``: `KeywordBookmarker` with ``separator=" "``,
``[p3:Bailey adopted dog named,May]`` (``"keywords"`` is the comma form). On LoCoMo dev, bookmark
reader, B=2000/4000/8000, it finds more than the comma form at every budget (docs/evaluation.md)."""
