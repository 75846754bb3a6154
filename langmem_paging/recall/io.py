"""The requests a recall makes beyond the step's (`langmem_paging.step.io`): search, score resident
texts, load cluster nodes, list a cluster's members, and tell hooks. `RecallIO` is what answers
them (`langmem_paging.runtime.thread_io.ThreadIO` for one thread); recall itself reads no store.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from langmem_paging.core.effects import Request
from langmem_paging.core.hooks import PageEvent, PagingHooks
from langmem_paging.core.records import ClusterNode
from langmem_paging.index.base import Hit
from langmem_paging.step.io import StepIO

__all__ = [
    "HookName",
    "ListMembers",
    "LoadClusters",
    "Notify",
    "RecallFlow",
    "RecallIO",
    "ScoreTexts",
    "Search",
]

logger = logging.getLogger("langmem_paging")

T = TypeVar("T")


class RecallIO(StepIO, Protocol):
    """The handlers of a recall's requests (and the step's), each sync and async."""

    def search(self, request: Search) -> list[Hit]: ...

    async def asearch(self, request: Search) -> list[Hit]: ...

    def score_texts(self, request: ScoreTexts) -> list[float]: ...

    async def ascore_texts(self, request: ScoreTexts) -> list[float]: ...

    def load_clusters(self, request: LoadClusters) -> dict[str, ClusterNode]: ...

    async def aload_clusters(self, request: LoadClusters) -> dict[str, ClusterNode]: ...

    def list_members(self, request: ListMembers) -> dict[str, list[str]]: ...

    async def alist_members(self, request: ListMembers) -> dict[str, list[str]]: ...

    def notify(self, request: Notify) -> None:
        for hook in request.hooks:
            for name, event in request.events:
                try:
                    _handlers(hook)[name][0](event)
                except Exception:  # noqa: BLE001 - a hook never fails the turn
                    logger.exception("paging hook %r failed on %s", hook, name)

    async def anotify(self, request: Notify) -> None:
        for hook in request.hooks:
            for name, event in request.events:
                try:
                    await _handlers(hook)[name][1](event)
                except Exception:  # noqa: BLE001
                    logger.exception("paging hook %r failed on %s", hook, name)


RecallFlow = Generator[Request[Any, RecallIO], object, T]
"""A flow of a recall's requests (the step's included)."""


@dataclass
class Search(Request[list[Hit], RecallIO]):
    """The best passages for a query among the pages `allow` accepts (the index is loaded from the
    store first if it does not hold the thread). Answer: hits, best first."""

    query: str
    """What the model searched for."""
    limit: int
    """The most hits."""
    allow: Callable[[str], bool]
    """Whether a page id may be returned (the running branch's pages)."""
    newest: int = 0
    """The branch's highest page number: pages above what the index holds are indexed first."""

    def answer(self, io: RecallIO) -> list[Hit]:
        return io.search(self)

    def aanswer(self, io: RecallIO) -> Awaitable[list[Hit]]:
        return io.asearch(self)


@dataclass
class ScoreTexts(Request[list[float], RecallIO]):
    """BM25 scores of texts still in the context, on the scale of the index's hits (the thread is
    loaded first, as for `Search`). Answer: one score per text."""

    query: str
    """What the model searched for."""
    texts: list[str]
    """The texts scored."""

    def answer(self, io: RecallIO) -> list[float]:
        return io.score_texts(self)

    def aanswer(self, io: RecallIO) -> Awaitable[list[float]]:
        return io.ascore_texts(self)


@dataclass
class LoadClusters(Request[dict[str, ClusterNode], RecallIO]):
    """Stored cluster nodes by id (those that exist). Answer: ``{cluster_id: ClusterNode}``."""

    cluster_ids: list[str]
    """The ids wanted."""

    def answer(self, io: RecallIO) -> dict[str, ClusterNode]:
        return io.load_clusters(self)

    def aanswer(self, io: RecallIO) -> Awaitable[dict[str, ClusterNode]]:
        return io.aload_clusters(self)


@dataclass
class ListMembers(Request[dict[str, list[str]], RecallIO]):
    """The member pages of clusters, at most `limit` each. Answer: ``{cluster_id: [page ids]}``."""

    cluster_ids: list[str]
    """The clusters."""
    limit: int
    """The most members listed per cluster."""

    def answer(self, io: RecallIO) -> dict[str, list[str]]:
        return io.list_members(self)

    def aanswer(self, io: RecallIO) -> Awaitable[dict[str, list[str]]]:
        return io.alist_members(self)


HookName = Literal["formed", "evicted", "recalled"]
"""A page life event a hook is told about (`PagingHooks.on_formed`, ...)."""


@dataclass
class Notify(Request[None, RecallIO]):
    """Tell hooks about page life events. Answer: None."""

    hooks: Sequence[PagingHooks]
    """Who is told."""
    events: list[tuple[HookName, PageEvent]]
    """The events, in order."""

    def answer(self, io: RecallIO) -> None:
        return io.notify(self)

    def aanswer(self, io: RecallIO) -> Awaitable[None]:
        return io.anotify(self)


def _handlers(
    hook: PagingHooks,
) -> dict[HookName, tuple[Callable[[PageEvent], None], Callable[[PageEvent], Awaitable[None]]]]:
    """A hook's sync and async handler of each event."""
    return {
        "formed": (hook.on_formed, hook.aon_formed),
        "evicted": (hook.on_evicted, hook.aon_evicted),
        "recalled": (hook.on_recalled, hook.aon_recalled),
    }
