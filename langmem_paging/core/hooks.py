"""Page life events: a page forms, is evicted, is recalled.

Subclass `PagingHooks` and pass instances as ``hooks=[...]`` (policies receive the
same events). Hooks run after the step's writes succeeded, sync or async like the
run; an exception in a hook is logged, never fails the turn.

Example:
    >>> class Counter(PagingHooks):
    ...     def __init__(self):
    ...         self.evicted = []
    ...     def on_evicted(self, event):
    ...         self.evicted += event.page_ids
    >>> hook = Counter()
    >>> hook.on_evicted(PageEvent(thread_id="t", page_ids=["p1"], turn=3))
    >>> hook.evicted
    ['p1']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PageEvent", "PagingHooks"]


@dataclass(frozen=True)
class PageEvent:
    """One life event of one or more pages of a thread."""

    thread_id: str
    """The thread."""
    page_ids: list[str]
    """The pages concerned (several when one step formed or evicted several)."""
    turn: int
    """The thread's user turn."""
    pages: list[Any] = field(default_factory=list)
    """The `Page` records, when the event has them (formed pages)."""


class PagingHooks:
    """No-op callbacks; override the ones you need (async ones default to the sync ones)."""

    def on_formed(self, event: PageEvent) -> None:
        """Pages were cut and stored (still resident)."""

    def on_evicted(self, event: PageEvent) -> None:
        """Pages left the context; bookmarks stand in their place."""

    def on_recalled(self, event: PageEvent) -> None:
        """`recall` returned these pages."""

    async def aon_formed(self, event: PageEvent) -> None:
        """Async `on_formed`."""
        self.on_formed(event)

    async def aon_evicted(self, event: PageEvent) -> None:
        """Async `on_evicted`."""
        self.on_evicted(event)

    async def aon_recalled(self, event: PageEvent) -> None:
        """Async `on_recalled`."""
        self.on_recalled(event)
