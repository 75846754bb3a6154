"""Requests a flow makes of the outside world, and the two drivers that answer them.

The paging step, the step engine and the recall service are generators: they yield a request,
a driver answers it and sends the answer back (or throws the error the answer raised into the
flow, which may handle it). Each request names its handler method (`Request.op`): the sync
driver calls ``io.<op>(request)``, the async driver awaits ``io.a<op>(request)``; nothing else
differs between sync and async paging.

Example:
    >>> from langmem_paging.state import PagingState
    >>> def flow():
    ...     numbers = yield Reserve("p", ["d1", "d2"], PagingState())
    ...     return numbers
    >>> run(flow(), LocalIO())
    [1, 2]
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

from langchain_core.messages import BaseMessage

from langmem_paging.bookmarks import Bookmark, BookmarkContext, Bookmarker, PageDraft
from langmem_paging.policies import EvictionPolicy
from langmem_paging.records import Page
from langmem_paging.state import PagingState

__all__ = [
    "ComputeFeatures",
    "adrive",
    "drive",
    "ComputeIO",
    "Flow",
    "LoadPages",
    "LocalIO",
    "MakeBookmarks",
    "MakeDigests",
    "Request",
    "Reserve",
    "arun",
    "run",
]

T = TypeVar("T")


class Request:
    """Something a flow asks for; `op` names the method of the I/O object that answers it."""

    op: ClassVar[str]


Flow = Generator[Request, Any, T]
"""A generator of requests returning a `T`."""


@dataclass
class Reserve(Request):
    """Allocate `len(digests)` page (``p``) or cluster (``c``) numbers on `state`'s branch.

    A number already taken in the store by a record with another digest (another branch's
    page) is never handed out; a record with the same digest is the same page (a retry).
    Answer: the numbers.
    """

    op: ClassVar[str] = "reserve"
    kind: Literal["p", "c"]
    digests: list[str]
    state: PagingState


@dataclass
class MakeBookmarks(Request):
    """Bookmark new pages. Answer: one `Bookmark` per draft."""

    op: ClassVar[str] = "make_bookmarks"
    bookmarker: Bookmarker
    drafts: list[PageDraft]
    context: BookmarkContext


@dataclass
class ComputeFeatures(Request):
    """Per-page features of new pages (e.g. a compact vector). Answer: one dict per page."""

    op: ClassVar[str] = "compute_features"
    policy: EvictionPolicy
    pages: list[Sequence[BaseMessage]]


@dataclass
class MakeDigests(Request):
    """Digests of pages by a digester (`langmem_paging.llm.LLMDigester`). Answer: one text or
    None per page."""

    op: ClassVar[str] = "make_digests"
    digester: Any
    pages: list[Sequence[BaseMessage]]
    max_tokens: list[int]


@dataclass
class LoadPages(Request):
    """Stored pages by id (those that exist). Answer: ``{page_id: Page}``."""

    op: ClassVar[str] = "load_pages"
    page_ids: list[str]


def run(flow: Generator[Request, Any, T], io: Any) -> T:
    """Drive a flow synchronously: ``io.<op>(request)`` answers each request."""
    answer: Any = None
    error: Exception | None = None
    while True:
        try:
            request = flow.throw(error) if error is not None else flow.send(answer)
        except StopIteration as stop:
            return stop.value
        try:
            answer, error = getattr(io, request.op)(request), None
        except Exception as exc:  # noqa: BLE001 - handed to the flow, which re-raises what it does not handle
            answer, error = None, exc


async def arun(flow: Generator[Request, Any, T], io: Any) -> T:
    """Drive a flow asynchronously: ``await io.a<op>(request)`` answers each request."""
    answer: Any = None
    error: Exception | None = None
    while True:
        try:
            request = flow.throw(error) if error is not None else flow.send(answer)
        except StopIteration as stop:
            return stop.value
        try:
            answer, error = await getattr(io, f"a{request.op}")(request), None
        except Exception as exc:  # noqa: BLE001 - handed to the flow, as in `run`
            answer, error = None, exc


def drive(reads: Generator[Any, Any, T], read: Callable[[Any], Any]) -> T:
    """Run a generator of plain reads (no `Request`s): each yielded value is answered by `read`.
    The store's operations and the cluster-forest walks are such generators."""
    try:
        request = next(reads)
        while True:
            request = reads.send(read(request))
    except StopIteration as stop:
        return stop.value


async def adrive(reads: Generator[Any, Any, T], read: Callable[[Any], Awaitable[Any]]) -> T:
    """`drive`, awaiting each read."""
    try:
        request = next(reads)
        while True:
            request = reads.send(await read(request))
    except StopIteration as stop:
        return stop.value


class ComputeIO:
    """Answers the requests that need no store: bookmarks, features and digests, each by its own
    object (sync, or awaited)."""

    def make_bookmarks(self, request: MakeBookmarks) -> list[Bookmark]:
        return request.bookmarker.bookmark(request.drafts, request.context)

    async def amake_bookmarks(self, request: MakeBookmarks) -> list[Bookmark]:
        return await request.bookmarker.abookmark(request.drafts, request.context)

    def compute_features(self, request: ComputeFeatures) -> list[dict[str, Any]]:
        return request.policy.features(request.pages)

    async def acompute_features(self, request: ComputeFeatures) -> list[dict[str, Any]]:
        return await request.policy.afeatures(request.pages)

    def make_digests(self, request: MakeDigests) -> list[str | None]:
        return list(request.digester.digest(request.pages, request.max_tokens))

    async def amake_digests(self, request: MakeDigests) -> list[str | None]:
        return list(await request.digester.adigest(request.pages, request.max_tokens))


class LocalIO(ComputeIO):
    """No store (the pure `page_messages`): numbers come from the state alone, and pages from
    `pages` (those the caller kept)."""

    def __init__(self, pages: Mapping[str, Page] | None = None) -> None:
        self.pages = pages or {}

    def reserve(self, request: Reserve) -> list[int]:
        return request.state.allocate(request.kind, len(request.digests))

    async def areserve(self, request: Reserve) -> list[int]:
        return self.reserve(request)

    def load_pages(self, request: LoadPages) -> dict[str, Page]:
        return {pid: self.pages[pid] for pid in request.page_ids if pid in self.pages}

    async def aload_pages(self, request: LoadPages) -> dict[str, Page]:
        return self.load_pages(request)
