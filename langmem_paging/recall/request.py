"""A recall's request and answer: one shape from the tool to the composer.

The recall tool builds one `RecallRequest` from the model's arguments and what sizes the result
(how many calls share the room, the calling message's tokens, the resident turns a search ranks,
view mode's edits, the ids a sibling call serves); the service and the composer read it as is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from langchain_core.messages import BaseMessage
from langgraph.store.base import BaseStore

from langmem_paging.core.blocks import Block

__all__ = ["RecallAnswer", "RecallArgs", "RecallRequest", "ResidentTurn", "Served"]

ResidentTurn = tuple[str, str, int]
"""A turn still in the context: ``(key, text, tokens)`` (tokens: of what keeping it keeps, its tool
group included)."""


@dataclass(frozen=True)
class Served:
    """Where a page or cluster asked by several recall calls of one message is served."""

    call: str
    """The tool call id of the recall call serving it."""
    room: int
    """Tokens that call's result has for each thing it serves: a page is pointed to only when
    it fits (whole, or a part with text)."""


@dataclass(kw_only=True)
class RecallRequest:
    """One call of the recall tool, as the model made it, with what sizes its result: one shape from
    the tool to the composer."""

    page_ids: Any = None
    """Page or cluster ids, in whatever shape the model sent them."""
    query: Any = None
    """Search text."""
    part: Any = None
    """Which part of a long page."""
    share: int = 1
    """How many recalls the model made at once (each gets that share of the room)."""
    call_tokens: int = 0
    """Tokens of the message that made the call (the next step keeps it)."""
    edits: Mapping[str, BaseMessage] = field(default_factory=dict)
    """View mode: the history's messages by id. A paged message the app edited since it was paged
    is recalled as the history now holds it (the edited text wins)."""
    resident: Sequence[ResidentTurn] = ()
    """Turns still in the context as ``(key, text, tokens)`` (tokens: of what keeping it keeps, its
    tool group included): a search ranks them beside the paged turns, and keeps those that rank."""
    served: Mapping[str, Served] = field(default_factory=dict)
    """Pages and clusters another recall call of the same message serves (the first asking for
    them): each is served once, and the others point to that call when its room holds the page."""


@dataclass
class RecallAnswer:
    """What a recall returns to the tool."""

    content: str | list[str | Block]
    """The tool message content: text, or text and the original image/file blocks it shows."""
    artifact: dict[str, Any]
    """Kept on the ToolMessage (not sent to the model) to shrink and re-expand it."""
    accessed: list[str]
    """Page ids to count one access each."""
    turn: int
    """The thread's user turn."""
    status: str = "success"
    """The tool message status: ``"error"`` when the page store could not be read."""
    kept: list[str] = field(default_factory=list)
    """Keys of resident turns the search ranked: the next step keeps them in the context."""


class RecallArgs(TypedDict, total=False):
    """A recall as `Pager.recall` takes it: what the model asked, what sizes the result (the recall
    tool works these out from the calling message), and where it reads."""

    store: BaseStore | None
    """The graph's store of this call (unless the pager has its own)."""
    page_ids: Any
    """Page or cluster ids, in whatever shape the model sent them."""
    query: Any
    """Search text."""
    part: Any
    """Which part of a long page."""
    share: int
    """How many tool calls the model made at once (each gets that share of the room)."""
    call_tokens: int
    """Tokens of the message that made the call (the next step protects it)."""
    history: Sequence[BaseMessage]
    """The state's messages (view mode: a paged message edited since is recalled as edited)."""
    served: Mapping[str, Served]
    """Ids another recall call of the same message serves, with its room (served once)."""
    context: Sequence[BaseMessage]
    """The messages the model sees (a search ranks its turns beside the paged ones and keeps those
    that rank: `RecallAnswer.kept`)."""
