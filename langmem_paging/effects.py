"""Requests the pure paging step makes of the outside world, and the drivers that answer them.

The step (`langmem_paging.paging`) is a generator: it yields a request, the driver
answers it and sends the answer back. A sync driver calls plain functions, an
async driver awaits coroutines; nothing else differs between `step` and `astep`.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from langchain_core.messages import BaseMessage

from langmem_paging.bookmarks import BookmarkContext, Bookmarker, PageDraft
from langmem_paging.policies import EvictionPolicy
from langmem_paging.state import PagingState

__all__ = [
    "ComputeFeatures",
    "Handlers",
    "LoadPages",
    "MakeDigests",
    "MakeBookmarks",
    "Reserve",
    "arun",
    "run",
]

T = TypeVar("T")


@dataclass
class Reserve:
    """Allocate `len(digests)` page (``p``) or cluster (``c``) numbers on `state`'s branch.

    A number already taken in the store by a record with another digest (another branch's
    page) is never handed out; a record with the same digest is the same page (a retry).
    Answer: the numbers.
    """

    kind: Literal["p", "c"]
    digests: list[str]
    state: PagingState


@dataclass
class MakeBookmarks:
    """Bookmark new pages. Answer: one `Bookmark` per draft."""

    bookmarker: Bookmarker
    drafts: list[PageDraft]
    context: BookmarkContext


@dataclass
class ComputeFeatures:
    """Per-page features of new pages (e.g. a compact vector). Answer: one dict per page."""

    policy: EvictionPolicy
    pages: list[Sequence[BaseMessage]]


@dataclass
class MakeDigests:
    """Digests of pages by a digester (`langmem_paging.llm.LLMDigester`). Answer: one text or
    None per page."""

    digester: Any
    pages: list[Sequence[BaseMessage]]
    max_tokens: list[int]


@dataclass
class LoadPages:
    """Stored pages by id (those that exist). Answer: ``{page_id: Page}``."""

    page_ids: list[str]


class Handlers(Protocol):
    """Answers to the step's store requests."""

    def reserve(self, request: Reserve) -> list[int]: ...

    async def areserve(self, request: Reserve) -> list[int]: ...

    def load_pages(self, request: LoadPages) -> dict: ...

    async def aload_pages(self, request: LoadPages) -> dict: ...


def run(gen: Generator[Any, Any, T], handlers: Handlers) -> T:
    """Drive a step generator synchronously."""
    answer = None
    try:
        while True:
            request = gen.send(answer)
            if isinstance(request, Reserve):
                answer = handlers.reserve(request)
            elif isinstance(request, MakeBookmarks):
                answer = request.bookmarker.bookmark(request.drafts, request.context)
            elif isinstance(request, ComputeFeatures):
                answer = request.policy.features(request.pages)
            elif isinstance(request, LoadPages):
                answer = handlers.load_pages(request)
            elif isinstance(request, MakeDigests):
                answer = request.digester.digest(request.pages, request.max_tokens)
            else:
                raise TypeError(f"unknown request {request!r}")
    except StopIteration as stop:
        return stop.value


async def arun(gen: Generator[Any, Any, T], handlers: Handlers) -> T:
    """Drive a step generator, awaiting async bookmarkers, policies and stores."""
    answer = None
    try:
        while True:
            request = gen.send(answer)
            if isinstance(request, Reserve):
                answer = await handlers.areserve(request)
            elif isinstance(request, MakeBookmarks):
                answer = await request.bookmarker.abookmark(request.drafts, request.context)
            elif isinstance(request, ComputeFeatures):
                answer = await request.policy.afeatures(request.pages)
            elif isinstance(request, LoadPages):
                answer = await handlers.aload_pages(request)
            elif isinstance(request, MakeDigests):
                answer = await request.digester.adigest(request.pages, request.max_tokens)
            else:
                raise TypeError(f"unknown request {request!r}")
    except StopIteration as stop:
        return stop.value


class LocalHandlers:
    """Handlers with no store (the pure `page_messages`): numbers come from the state alone,
    and pages from `pages` (those the caller kept)."""

    def __init__(self, pages: Mapping[str, Any] | None = None) -> None:
        self.pages = pages or {}

    def reserve(self, request: Reserve) -> list[int]:
        return request.state.allocate(request.kind, len(request.digests))

    async def areserve(self, request: Reserve) -> list[int]:
        return self.reserve(request)

    def load_pages(self, request: LoadPages) -> dict:
        return {pid: self.pages[pid] for pid in request.page_ids if pid in self.pages}

    async def aload_pages(self, request: LoadPages) -> dict:
        return self.load_pages(request)

