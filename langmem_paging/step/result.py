"""What one paging step decided."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from langmem_paging.core.messages import merge_messages
from langmem_paging.core.records import ClusterNode, Page
from langmem_paging.core.state import PagingState

__all__ = ["PagingResult", "PagingValue", "Protected"]

PagingValue = dict[str, Any] | PagingState | None
"""A branch's ``paging`` value as a step takes it: as the graph holds it (the channel's dict, None before
the first step), or parsed; the step parses it once (`PagingState.from_value`), nothing before it does."""


@dataclass(frozen=True)
class Protected:
    """A unit of the view nothing may evict (a message, or a tool call with its results)."""

    ids: tuple[str, ...]
    """Its messages' ids (keys), in order."""
    why: str
    """Why: ``the newest user message``, ``pinned``, ``it took a stand-in's id this step``, ..."""
    tokens: int
    """Its tokens as the step was given it."""


@dataclass
class PagingResult:
    """What one paging step decided."""

    view: list[BaseMessage]
    """The messages the model should receive."""
    state: PagingState
    """The branch's new paging state (the input state is never mutated)."""
    updates: list[BaseMessage] = field(default_factory=list)
    """`add_messages` updates that turn the input messages into `view` (replace mode): bookmarks
    under the id of their page's first message, `RemoveMessage` for the page's other messages,
    shrunk recall results and paged tool results under their own ids."""
    pages: list[Page] = field(default_factory=list)
    """Pages formed by this step, to store before the state is used."""
    nodes: list[ClusterNode] = field(default_factory=list)
    """Cluster nodes made by this step, to store with the pages."""
    formed: list[str] = field(default_factory=list)
    """Ids of the pages formed."""
    evicted: list[str] = field(default_factory=list)
    """Ids of the pages evicted (now shown by a bookmark)."""
    folded: list[str] = field(default_factory=list)
    """Ids of the pages whose bookmarks folded into a cluster."""
    tokens_before: int = 0
    """Tokens of the view before this step."""
    tokens: int = 0
    """Tokens of `view`."""
    protected_tokens: int = 0
    """Tokens nothing can evict: system and pinned messages, the newest user message, the
    latest tool group, unanswered calls, bookmarks."""
    over_budget: bool = False
    """True when even after paging the view exceeds the budget (too much is protected)."""
    first_over_budget: bool = False
    """True the first time on this branch that `over_budget` happened (warn once)."""
    protected: list[Protected] = field(default_factory=list)
    """When `over_budget`: what nothing may evict, unit by unit with why (bookmarks apart), as the
    warning names it. Empty otherwise."""
    evicted_ids: dict[str, list[str]] = field(default_factory=dict, repr=False)
    """Message ids of each page evicted by this step."""

    @property
    def changed(self) -> bool:
        """True when something was formed, evicted, folded or rewritten."""
        return bool(self.updates or self.pages or self.nodes)

    def apply(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """`messages` (the list the step paged, or the state's list it came from) with this step's
        `updates` merged in by LangGraph's own `add_messages`, as a graph applies them (an example:
        `langmem_paging.reconstruct_history`'s)."""
        return merge_messages(messages, self.updates) if self.updates else list(messages)
