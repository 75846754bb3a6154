"""The paging step's requests, the protocol that answers them, and `LocalIO`, which answers them
with no store (the pure `page_messages`).

Example:
    >>> from langmem_paging.core.effects import ask, run
    >>> from langmem_paging.core.state import PagingState
    >>> def flow() -> Flow[list[int]]:
    ...     numbers = yield from ask(Reserve("p", ["d1", "d2"], PagingState()))
    ...     return numbers
    >>> run(flow(), LocalIO())
    [1, 2]
"""

from __future__ import annotations

from collections.abc import Awaitable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from langchain_core.messages import BaseMessage

from langmem_paging.core.effects import Request, ask
from langmem_paging.core.records import Page, Reservation
from langmem_paging.core.state import PagingState, TermSketch, compact_terms
from langmem_paging.strategies.bookmarks import Bookmark, BookmarkContext, Bookmarker, PageDraft
from langmem_paging.strategies.policies import EvictionPolicy

__all__ = [
    "ComputeFeatures",
    "ComputeIO",
    "Digester",
    "Flow",
    "LoadPages",
    "LoadSketch",
    "LoadTerms",
    "LocalIO",
    "MakeBookmarks",
    "MakeDigests",
    "Reserve",
    "StepIO",
    "with_terms",
]

T = TypeVar("T")

Flow = Generator[Request[Any, "StepIO"], object, T]
"""A flow of the paging step's requests returning a `T` (what it is sent is `object`: answers
are typed by `ask`)."""


class Digester(Protocol):
    """What writes warm digests (`langmem_paging.strategies.llm.LLMDigester`)."""

    def digest(
        self, pages: Sequence[Sequence[BaseMessage]], max_tokens: Sequence[int]
    ) -> list[str | None]: ...

    async def adigest(
        self, pages: Sequence[Sequence[BaseMessage]], max_tokens: Sequence[int]
    ) -> list[str | None]: ...


class StepIO(Protocol):
    """The handlers of the paging step's requests, each sync and async (what `LocalIO` answers
    with no store, and `langmem_paging.runtime.thread_io.PagingIO` extends)."""

    def reserve(self, request: Reserve) -> Reservation: ...

    async def areserve(self, request: Reserve) -> Reservation: ...

    def load_pages(self, request: LoadPages) -> dict[str, Page]: ...

    async def aload_pages(self, request: LoadPages) -> dict[str, Page]: ...

    def load_sketch(self, request: LoadSketch) -> TermSketch: ...

    async def aload_sketch(self, request: LoadSketch) -> TermSketch: ...

    def load_terms(self, request: LoadTerms) -> EntryTerms: ...

    async def aload_terms(self, request: LoadTerms) -> EntryTerms: ...

    def make_bookmarks(self, request: MakeBookmarks) -> list[Bookmark]: ...

    async def amake_bookmarks(self, request: MakeBookmarks) -> list[Bookmark]: ...

    def compute_features(self, request: ComputeFeatures) -> list[dict[str, Any]]: ...

    async def acompute_features(self, request: ComputeFeatures) -> list[dict[str, Any]]: ...

    def make_digests(self, request: MakeDigests) -> list[str | None]: ...

    async def amake_digests(self, request: MakeDigests) -> list[str | None]: ...


@dataclass
class Reserve(Request[Reservation, StepIO]):
    """Allocate `len(digests)` page (``p``) or cluster (``c``) numbers on `state`'s branch.

    A number already taken in the store by a record with another digest (another branch's
    page) is never handed out; a record with the same digest is the same page (a retry, or a
    branch that made it too): it comes back in the answer's `held`, to be taken as stored.
    Answer: the numbers (a `Reservation`).
    """

    kind: Literal["p", "c"]
    """``p`` for page numbers, ``c`` for cluster numbers."""
    digests: list[str]
    """One digest per number wanted: the content the number is for."""
    state: PagingState
    """The branch the numbers are allocated on."""

    def answer(self, io: StepIO) -> Reservation:
        return io.reserve(self)

    def aanswer(self, io: StepIO) -> Awaitable[Reservation]:
        return io.areserve(self)


@dataclass
class MakeBookmarks(Request[list[Bookmark], StepIO]):
    """Bookmark new pages. Answer: one `Bookmark` per draft."""

    bookmarker: Bookmarker
    """The bookmarker that writes them."""
    drafts: list[PageDraft]
    """The new pages."""
    context: BookmarkContext
    """What the bookmarker may read besides the drafts."""

    def answer(self, io: StepIO) -> list[Bookmark]:
        return io.make_bookmarks(self)

    def aanswer(self, io: StepIO) -> Awaitable[list[Bookmark]]:
        return io.amake_bookmarks(self)


@dataclass
class ComputeFeatures(Request[list[dict[str, Any]], StepIO]):
    """Per-page features of new pages (e.g. a compact vector). Answer: one dict per page."""

    policy: EvictionPolicy
    """The eviction policy that computes (and later reads) them."""
    pages: list[Sequence[BaseMessage]]
    """The messages of each new page."""

    def answer(self, io: StepIO) -> list[dict[str, Any]]:
        return io.compute_features(self)

    def aanswer(self, io: StepIO) -> Awaitable[list[dict[str, Any]]]:
        return io.acompute_features(self)


@dataclass
class MakeDigests(Request[list["str | None"], StepIO]):
    """Digests of pages by a digester (`langmem_paging.strategies.llm.LLMDigester`). Answer: one text or
    None per page."""

    digester: Digester
    """The digester."""
    pages: list[Sequence[BaseMessage]]
    """The messages of each page."""
    max_tokens: list[int]
    """The most tokens each digest may take."""

    def answer(self, io: StepIO) -> list[str | None]:
        return io.make_digests(self)

    def aanswer(self, io: StepIO) -> Awaitable[list[str | None]]:
        return io.amake_digests(self)


@dataclass
class LoadPages(Request[dict[str, Page], StepIO]):
    """Stored pages by id (those that exist). Answer: ``{page_id: Page}``."""

    page_ids: list[str]
    """The ids wanted."""

    def answer(self, io: StepIO) -> dict[str, Page]:
        return io.load_pages(self)

    def aanswer(self, io: StepIO) -> Awaitable[dict[str, Page]]:
        return io.aload_pages(self)


@dataclass
class LoadSketch(Request[TermSketch, StepIO]):
    """The thread's keyword sketch (`langmem_paging.core.sketch`), read once by a step that forms
    pages, before they are bookmarked. Answer: a `TermSketch` of the caller's own to count the new
    pages into and hand to `PagingState.keep_sketch`: with no store, the sketch `state` carries
    (`checkpointed`); with a store, the thread's record (or, while the thread has none, the sketch
    an old checkpoint carried), which the step's `Commit` writes back with its pages."""

    state: PagingState
    """The branch's paging state."""

    def answer(self, io: StepIO) -> TermSketch:
        return io.load_sketch(self)

    def aanswer(self, io: StepIO) -> Awaitable[TermSketch]:
        return io.aload_sketch(self)


@dataclass
class EntryTerms:
    """Weighted terms of shown pages and cluster roots, as their records hold them."""

    pages: dict[str, dict[str, float]]
    """By page id (pages with no record, or none to read, are left out)."""
    clusters: dict[str, dict[str, float]]
    """By cluster id (likewise)."""


@dataclass
class LoadTerms(Request[EntryTerms, StepIO]):
    """The terms of shown pages and cluster roots, which a store-backed checkpoint leaves out
    (`PagingState.terms_stored`): read by a step that folds, tiers or evicts next to clusters, once,
    for the entries it considers (`with_terms`). Answer: `EntryTerms` read from the page records'
    ``features["terms"]`` and the cluster nodes' ``terms``."""

    page_ids: list[str]
    """Shown pages whose terms are wanted."""
    cluster_ids: list[str]
    """Cluster roots whose terms are wanted."""

    def answer(self, io: StepIO) -> EntryTerms:
        return io.load_terms(self)

    def aanswer(self, io: StepIO) -> Awaitable[EntryTerms]:
        return io.aload_terms(self)


def with_terms(
    state: PagingState, page_ids: Iterable[str] = (), cluster_ids: Iterable[str] = ()
) -> Flow[None]:
    """Give the listed shown pages and cluster roots of `state` their terms, reading those it lacks
    (a checkpoint with them, or an entry made or read earlier in the step, has them: nothing read).

    Terms read are cut as the checkpoint used to cut them (`compact_terms`), so a fold decides as it
    did when they travelled in the state.
    """
    pages = [p for p in page_ids if p in state.shown and not state.shown[p].terms]
    clusters = [c for c in cluster_ids if c in state.clusters and not state.clusters[c].terms]
    if not pages and not clusters:
        return
    found = yield from ask(LoadTerms(pages, clusters))
    for page_id, terms in found.pages.items():
        state.shown[page_id].terms = compact_terms(terms)
    for cluster_id, terms in found.clusters.items():
        state.clusters[cluster_id].terms = compact_terms(terms)


def page_terms(pages: Mapping[str, Page]) -> dict[str, dict[str, float]]:
    """The terms page records hold (``features["terms"]``), by page id."""
    return {
        pid: terms for pid, page in pages.items() if isinstance(terms := page.features.get("terms"), dict)
    }


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


class LocalIO(ComputeIO, StepIO):
    """No store (the pure `page_messages`): numbers and the keyword sketch come from the state
    alone, and pages from `pages` (those the caller kept)."""

    def __init__(self, pages: Mapping[str, Page] | None = None) -> None:
        self.pages = pages or {}

    def reserve(self, request: Reserve) -> Reservation:
        return Reservation(request.state.allocate(request.kind, len(request.digests)))

    async def areserve(self, request: Reserve) -> Reservation:
        return self.reserve(request)

    def load_pages(self, request: LoadPages) -> dict[str, Page]:
        return {pid: self.pages[pid] for pid in request.page_ids if pid in self.pages}

    async def aload_pages(self, request: LoadPages) -> dict[str, Page]:
        return self.load_pages(request)

    def load_sketch(self, request: LoadSketch) -> TermSketch:
        sketch = request.state.carried_sketch()
        sketch.checkpointed = True  # the caller keeps no store: the sketch stays in the state
        return sketch

    async def aload_sketch(self, request: LoadSketch) -> TermSketch:
        return self.load_sketch(request)

    def load_terms(self, request: LoadTerms) -> EntryTerms:
        # the pure path keeps cluster terms in the state; only the caller's pages can be read
        return EntryTerms(page_terms(self.load_pages(LoadPages(request.page_ids))), {})

    async def aload_terms(self, request: LoadTerms) -> EntryTerms:
        return self.load_terms(request)
