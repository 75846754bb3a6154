"""LLM-written bookmarks and digests, through any LangChain chat model.

`LLMBookmarker` asks a chat model for a page's index keywords; `LLMDigester` for a short
digest of a warm page. Both batch (`model.batch` / `model.abatch`), cache by page content
(a page asked about twice costs one call), fall back to the extractive default when the
model's answer is unusable or the call fails, and never send more than `max_input_tokens`
of a page. For a bookmark that is deterministic across processes, give the model
``temperature=0``; within a process the cache makes it so, and a bookmark is written once.

`LLMDigester` also keeps digests off a turn's critical path: as a hook it writes digests for
pages as they are evicted, in the background, and the tiers use a digest only once it is
ready (the extractive one until then).

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from langmem_paging.strategies.bookmarks import BookmarkContext, PageDraft
    >>> from langmem_paging.testing import ScriptedChatModel
    >>> from langmem_paging.core.tokens import TokenCounter
    >>> model = ScriptedChatModel(responses=["Farid, greyhound, adoption, shelter"])
    >>> page = PageDraft("p3", [HumanMessage("My cousin Farid adopted a greyhound from the shelter.", id="m")])
    >>> LLMBookmarker(model).bookmark([page], BookmarkContext(count_text=TokenCounter().count_text))[0].text
    '[p3:Farid,greyhound,adoption,shelter]'
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Sequence
from typing import Any, cast

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langmem_paging.core.hooks import PageEvent, PagingHooks
from langmem_paging.core.library_messages import format_bookmark
from langmem_paging.core.lru import LRU
from langmem_paging.core.records import messages_digest
from langmem_paging.core.rendering import render_message
from langmem_paging.core.tokens import TokenCounter
from langmem_paging.strategies.bookmarks import (
    Bookmark,
    BookmarkContext,
    Bookmarker,
    KeywordBookmarker,
    PageDraft,
)

__all__ = ["BOOKMARK_PROMPT", "DIGEST_PROMPT", "LLMBookmarker", "LLMDigester"]

logger = logging.getLogger("langmem_paging")

BOOKMARK_PROMPT = (
    "You index pages of a conversation so that a reader can find the right page later from a "
    "question. Reply with 4 to 8 keywords for the page, comma-separated, most specific first: "
    "names, numbers, dates, places, and the specific things a later question would mention. "
    "No sentences, no explanation."
)
DIGEST_PROMPT = (
    "Summarize this page of a conversation in at most {words} words, as short lines keeping "
    "who said what, names, numbers and dates. No preamble."
)
_UNSAFE = re.compile(r"[\[\],:|\n]")


def _page_text(messages: Sequence[BaseMessage], counter: TokenCounter, max_tokens: int) -> str:
    return counter.truncate_text("\n".join(render_message(m) for m in messages), max_tokens)


def _text(reply: Any) -> str:
    content = getattr(reply, "content", reply)
    if isinstance(content, list):
        content = " ".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content or "")


def _chat_parts(model: Any, cache_size: int) -> tuple[Any, LRU[str, Any], TokenCounter]:
    """The chat model (checked), a cache and a counter: what both writers start from."""
    if not hasattr(model, "batch") or not hasattr(model, "abatch"):
        raise TypeError("`model` must be a LangChain chat model (with batch and abatch).")
    return model, LRU(cache_size), TokenCounter()


class LLMBookmarker(Bookmarker):
    """Bookmarks whose keywords a chat model writes.

    Args:
        model: Any LangChain chat model (``temperature=0`` for determinism).
        max_keywords: Keywords kept at most.
        max_tokens: Longest bookmark.
        max_input_tokens: Most page text sent.
        cache_size: Pages remembered.
        fallback: Used when the model's answer has no usable keyword or the call fails
            (default `KeywordBookmarker`); its terms also feed clustering.
    """

    name = "llm"

    def __init__(
        self,
        model: Any,
        *,
        max_keywords: int = 8,
        max_tokens: int = 24,
        max_input_tokens: int = 1500,
        cache_size: int = 4096,
        fallback: Bookmarker | None = None,
    ) -> None:
        self.model, self._cache, self._counter = _chat_parts(model, cache_size)
        self.max_keywords = max_keywords
        self.max_tokens = max_tokens
        self.max_input_tokens = max_input_tokens
        self.fallback = fallback or KeywordBookmarker(max_tokens=max_tokens, max_keywords=max_keywords)

    def _key(self, page: PageDraft) -> str:
        return messages_digest(page.messages)

    def _prompt(self, page: PageDraft) -> list[BaseMessage]:
        return [
            SystemMessage(BOOKMARK_PROMPT),
            HumanMessage(_page_text(page.messages, self._counter, self.max_input_tokens)),
        ]

    def _make(self, page: PageDraft, reply: str, fallback: Bookmark, context: BookmarkContext) -> Bookmark:
        chosen: list[str] = []
        for raw in re.split(r"[,\n;]+", reply):
            word = _UNSAFE.sub("", raw.strip().strip(".-*\"'")).strip()
            if not word or word.lower() in {c.lower() for c in chosen} or len(chosen) >= self.max_keywords:
                continue
            if context.count_text(format_bookmark(page.id, [*chosen, word])) <= self.max_tokens:
                chosen.append(word)
        if not chosen:
            return fallback
        terms = {**dict.fromkeys(chosen, 1.0), **fallback.terms}
        return Bookmark(format_bookmark(page.id, chosen), chosen, terms)

    def _split(self, pages: Sequence[PageDraft]) -> tuple[list[Any], list[int]]:
        out: list[Any] = [self._cache.get(self._key(p)) for p in pages]
        return out, [i for i, b in enumerate(out) if b is None]

    def _finish(
        self,
        pages: Sequence[PageDraft],
        out: list[Any],
        todo: list[int],
        replies: Sequence[Any],
        context: BookmarkContext,
    ) -> list[Bookmark]:
        fallbacks = self.fallback.bookmark([pages[i] for i in todo], context) if todo else []
        for i, reply, fallback in zip(todo, replies, fallbacks, strict=True):
            if isinstance(reply, Exception):
                logger.warning("LLM bookmark failed for %s (%s); using keywords", pages[i].id, reply)
                out[i] = fallback
                continue
            out[i] = self._make(pages[i], _text(reply), fallback, context)
            self._cache.put(self._key(pages[i]), out[i])
        return cast(list[Bookmark], out)

    def bookmark(self, pages: Sequence[PageDraft], context: BookmarkContext) -> list[Bookmark]:
        out, todo = self._split(pages)
        replies = (
            self.model.batch([self._prompt(pages[i]) for i in todo], return_exceptions=True) if todo else []
        )
        return self._finish(pages, out, todo, replies, context)

    async def abookmark(self, pages: Sequence[PageDraft], context: BookmarkContext) -> list[Bookmark]:
        out, todo = self._split(pages)
        replies = (
            await self.model.abatch([self._prompt(pages[i]) for i in todo], return_exceptions=True)
            if todo
            else []
        )
        return self._finish(pages, out, todo, replies, context)


class LLMDigester(PagingHooks):
    """Warm-tier digests a chat model writes, made in the background as pages are evicted.

    Pass it as ``TierScoring(digester=LLMDigester(model))`` (or `UtilityScoring`); the tiers also
    register it as a hook. Until a page's digest is ready, the extractive digest stands in.

    Args:
        model: Any LangChain chat model.
        max_input_tokens: Most page text sent.
        cache_size: Digests remembered.
        background: Write digests in the background (False: when a page is promoted, on the turn).
    """

    def __init__(
        self, model: Any, *, max_input_tokens: int = 2000, cache_size: int = 4096, background: bool = True
    ) -> None:
        self.model, self._cache, self._counter = _chat_parts(model, cache_size)
        self.max_input_tokens = max_input_tokens
        self.background = background
        self._pending: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    def _prompt(self, messages: Sequence[BaseMessage], max_tokens: int) -> list[BaseMessage]:
        words = max(10, int(max_tokens * 0.7))
        return [
            SystemMessage(DIGEST_PROMPT.format(words=words)),
            HumanMessage(_page_text(messages, self._counter, self.max_input_tokens)),
        ]

    def ready(self, messages: Sequence[BaseMessage]) -> str | None:
        """The digest of these messages if it was written, else None."""
        ready = self._cache.get(messages_digest(messages))
        return ready if isinstance(ready, str) else None

    def digest(self, pages: Sequence[Sequence[BaseMessage]], max_tokens: Sequence[int]) -> list[str | None]:
        """Digests of pages (None where the model failed), written now and cached."""
        replies = self.model.batch(
            [self._prompt(m, t) for m, t in zip(pages, max_tokens, strict=True)], return_exceptions=True
        )
        return [self._keep(m, t, r) for m, t, r in zip(pages, max_tokens, replies, strict=True)]

    async def adigest(
        self, pages: Sequence[Sequence[BaseMessage]], max_tokens: Sequence[int]
    ) -> list[str | None]:
        """Async `digest`."""
        replies = await self.model.abatch(
            [self._prompt(m, t) for m, t in zip(pages, max_tokens, strict=True)], return_exceptions=True
        )
        return [self._keep(m, t, r) for m, t, r in zip(pages, max_tokens, replies, strict=True)]

    def _keep(self, messages: Sequence[BaseMessage], max_tokens: int, reply: Any) -> str | None:
        key = messages_digest(messages)
        self._pending.discard(key)
        if isinstance(reply, Exception):
            logger.warning("LLM digest failed (%s); the extractive digest stays", reply)
            return None
        text = self._counter.truncate_text(_text(reply).strip(), max_tokens)
        if text:
            self._cache.put(key, text)
        return text or None

    # -- hooks: digests of evicted pages, off the turn's path ----------------------------------
    def _wanted(self, event: PageEvent) -> list[Any]:
        pages = [
            p
            for p in event.pages
            if messages_digest(p.messages) not in self._pending and self.ready(p.messages) is None
        ]
        for page in pages:
            self._pending.add(messages_digest(page.messages))
        return pages

    def on_formed(self, event: PageEvent) -> None:
        pages = self._wanted(event) if self.background else []
        if pages:
            args = ([p.messages for p in pages], [max(16, p.token_count // 4) for p in pages])
            threading.Thread(target=self.digest, args=args, daemon=True).start()

    async def aon_formed(self, event: PageEvent) -> None:
        pages = self._wanted(event) if self.background else []
        if pages:
            task = asyncio.get_running_loop().create_task(
                self.adigest([p.messages for p in pages], [max(16, p.token_count // 4) for p in pages])
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
