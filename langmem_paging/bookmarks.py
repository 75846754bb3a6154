"""Bookmarks: the tiny ``[pN:kw1,kw2,...]`` that stands where an evicted page was.

The default `KeywordBookmarker` picks the words that tell this page apart from the
other pages of the thread: names, numbers and dates first, then rare terms (IDF
over the thread's pages). It is deterministic, so the same page under the same
thread statistics gives the same bookmark byte for byte.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from langchain_core.messages import BaseMessage, HumanMessage

from langmem_paging.messages import METADATA_KEY, speaker
from langmem_paging.text import STOPWORDS, words
from langmem_paging.tokens import message_text

__all__ = [
    "BOOKMARK_PATTERN",
    "Bookmarker",
    "BookmarkContext",
    "KeywordBookmarker",
    "bookmark_message",
    "format_bookmark",
    "parse_bookmark",
]

BOOKMARK_PATTERN = re.compile(r"\[(p\d+):([^\[\]\n]*)\]")
"""Matches bookmark-shaped text. Only messages with library metadata are bookmarks."""

_MONTHS = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday "
    "saturday sunday".split()
)
_SENTENCE_END = re.compile(r"[.!?]\s*$")
_UNSAFE = re.compile(r"[\[\],:\n]")


@dataclass(frozen=True)
class BookmarkContext:
    """What a bookmarker may know besides the page itself."""

    doc_freq: Mapping[str, int]
    """In how many of the thread's pages each lower-cased term occurs."""
    n_docs: int
    """How many pages the thread has formed."""
    count_text: Callable[[str], int]
    """Counts tokens of a string with the paging tokenizer."""


class Bookmarker(Protocol):
    """Makes the bookmark text for a page. Must be deterministic."""

    def __call__(
        self, page_id: str, messages: Sequence[BaseMessage], context: BookmarkContext
    ) -> tuple[str, list[str]]:
        """Return ``(bookmark_text, keywords)``."""
        ...


def format_bookmark(page_id: str, keywords: Sequence[str]) -> str:
    """``format_bookmark("p3", ["Caroline", "adoption"])`` -> ``'[p3:Caroline,adoption]'``."""
    return f"[{page_id}:{','.join(keywords)}]"


def parse_bookmark(text: str) -> tuple[str, list[str]] | None:
    """Split bookmark-shaped text into ``(page_id, keywords)``, or None."""
    match = BOOKMARK_PATTERN.fullmatch(text.strip())
    if match is None:
        return None
    keywords = [k for k in match.group(2).split(",") if k]
    return match.group(1), keywords


def bookmark_message(page_id: str, text: str, message_id: str) -> HumanMessage:
    """The message that replaces a page: same id as the page's first message, marked as ours."""
    return HumanMessage(
        content=text, id=message_id, additional_kwargs={METADATA_KEY: {"bookmark": page_id}}
    )


def _keyword_scores(messages: Sequence[BaseMessage], context: BookmarkContext) -> list[tuple[str, float]]:
    """Candidate keywords (surface form) with scores, best first, ties broken alphabetically."""
    tf: Counter[str] = Counter()
    surface: dict[str, Counter[str]] = {}
    salient: set[str] = set()
    for message in messages:
        text = message_text(message)
        position = 0
        for word in words(text):
            at = text.find(word, position)
            position = at + len(word) if at >= 0 else position
            term = word.lower().replace("’", "'")
            if len(term) < 2 or term in STOPWORDS:
                continue
            tf[term] += 1
            surface.setdefault(term, Counter())[_UNSAFE.sub("", word)] += 1
            sentence_start = at <= 0 or bool(_SENTENCE_END.search(text[:at]))
            if any(ch.isdigit() for ch in term) or term in _MONTHS:
                salient.add(term)
            elif word[0].isupper() and not sentence_start:
                salient.add(term)
    n = context.n_docs
    scored = []
    for term, count in tf.items():
        idf = math.log((n + 1) / (context.doc_freq.get(term, 0) + 1)) + 1
        score = (1 + math.log(count)) * idf * (2.0 if term in salient else 1.0)
        form = max(surface[term].items(), key=lambda kv: (kv[1], kv[0]))[0]
        if form:
            scored.append((form, score))
    scored.sort(key=lambda fs: (-fs[1], fs[0].lower()))
    return scored


class KeywordBookmarker:
    """Distinctive keywords that fit in `min_tokens`..`max_tokens` tiktoken tokens.

    Args:
        min_tokens: Shortest bookmark; short pages are padded with speakers and size.
        max_tokens: Longest bookmark.
        max_keywords: Most keywords in one bookmark.

    Example:
        >>> from langchain_core.messages import HumanMessage, AIMessage
        >>> from langmem_paging.tokens import TokenCounter
        >>> counter = TokenCounter()
        >>> page = [HumanMessage("Caroline adopted a dog named Bailey in May 2023.", id="m1"),
        ...         AIMessage("Bailey sounds lovely!", id="m2")]
        >>> ctx = BookmarkContext(doc_freq={}, n_docs=1, count_text=counter.count_text)
        >>> KeywordBookmarker()("p3", page, ctx)[0]
        '[p3:Bailey,2023,May,adopted,Caroline,dog,lovely,named]'
    """

    def __init__(self, *, min_tokens: int = 8, max_tokens: int = 24, max_keywords: int = 8) -> None:
        if not 1 <= min_tokens <= max_tokens:
            raise ValueError("`min_tokens` must be at least 1 and at most `max_tokens`.")
        self.min_tokens = min_tokens
        self.max_tokens = max_tokens
        self.max_keywords = max_keywords

    def __call__(
        self, page_id: str, messages: Sequence[BaseMessage], context: BookmarkContext
    ) -> tuple[str, list[str]]:
        chosen: list[str] = []
        seen: set[str] = set()

        def fits(extra: str) -> bool:
            return context.count_text(format_bookmark(page_id, [*chosen, extra])) <= self.max_tokens

        for form, _ in _keyword_scores(messages, context):
            if len(chosen) >= self.max_keywords:
                break
            if form.lower() not in seen and fits(form):
                chosen.append(form)
                seen.add(form.lower())
        fillers = [_UNSAFE.sub("", speaker(m)) for m in messages] + [f"{len(messages)}msgs", "page", "text"]
        for filler in fillers:
            if context.count_text(format_bookmark(page_id, chosen)) >= self.min_tokens:
                break
            if filler and filler.lower() not in seen and fits(filler):
                chosen.append(filler)
                seen.add(filler.lower())
        return format_bookmark(page_id, chosen), chosen
