"""Boundary strategies: where one page ends and the next begins.

A strategy answers one question, ``starts_new_page(page, unit)``: does this unit
open a new page after the units already in the running page? Units are atomic
(see `langmem_paging.core.messages.split_units`), so no strategy can split a tool call
from its results.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from datetime import timedelta

from langchain_core.messages import BaseMessage

from langmem_paging.core.messages import Unit, is_user_turn, message_session, message_timestamp
from langmem_paging.core.text import content_terms

__all__ = [
    "BOUNDARIES",
    "BoundaryStrategy",
    "ExchangeBoundary",
    "FixedSizeBoundary",
    "SessionBoundary",
    "TokenSizeBoundary",
    "TopicShiftBoundary",
    "get_boundary",
]

CountMessage = Callable[[BaseMessage], int]


class BoundaryStrategy(ABC):
    """Decides where pages are cut."""

    name: str = "boundary"

    @abstractmethod
    def starts_new_page(self, page: Sequence[Unit], unit: Unit, count_message: CountMessage) -> bool:
        """True if `unit` must open a new page after the non-empty running `page`."""


def _sized(kind: str, size: int) -> tuple[int, str]:
    """A size strategy's N (at least 1) and name, ``<kind>_N``."""
    if size < 1:
        raise ValueError(f"`{kind}_N` needs N >= 1.")
    return size, f"{kind}_{size}"


class FixedSizeBoundary(BoundaryStrategy):
    """``fixed_N``: a page closes once it holds N messages (a tool group may overshoot)."""

    def __init__(self, size: int) -> None:
        self.size, self.name = _sized("fixed", size)

    def starts_new_page(self, page: Sequence[Unit], unit: Unit, count_message: CountMessage) -> bool:
        return sum(len(u.messages) for u in page) >= self.size


class TokenSizeBoundary(BoundaryStrategy):
    """``tokens_N``: a page closes before the unit that would take it past N tokens."""

    def __init__(self, size: int) -> None:
        self.size, self.name = _sized("tokens", size)

    def starts_new_page(self, page: Sequence[Unit], unit: Unit, count_message: CountMessage) -> bool:
        used = sum(count_message(m) for u in page for m in u.messages)
        return used + sum(count_message(m) for m in unit.messages) > self.size


class ExchangeBoundary(BoundaryStrategy):
    """``exchange``: each user turn opens a page holding everything it caused."""

    name = "exchange"

    def starts_new_page(self, page: Sequence[Unit], unit: Unit, count_message: CountMessage) -> bool:
        return is_user_turn(unit.messages[0])


class SessionBoundary(BoundaryStrategy):
    """``session``: a new ``session_id`` or a time gap opens a page.

    Reads ``additional_kwargs["session_id"]`` and ``additional_kwargs["timestamp"]``.
    Messages with neither stay in the running page.
    """

    name = "session"

    def __init__(self, gap: timedelta = timedelta(minutes=30)) -> None:
        self.gap = gap

    def starts_new_page(self, page: Sequence[Unit], unit: Unit, count_message: CountMessage) -> bool:
        first = unit.messages[0]
        previous = page[-1].messages[-1]
        session, previous_session = message_session(first), message_session(previous)
        if session is not None and previous_session is not None and session != previous_session:
            return True
        when, previous_when = message_timestamp(first), message_timestamp(previous)
        return when is not None and previous_when is not None and when - previous_when > self.gap


class TopicShiftBoundary(BoundaryStrategy):
    """``topic_shift``: a page closes when a unit shares too few words with it.

    Similarity is the share of the unit's content words already in the running
    page; below `threshold` (and once the page has `min_messages`) a new page opens.
    """

    name = "topic_shift"

    def __init__(self, threshold: float = 0.15, min_messages: int = 4) -> None:
        self.threshold = threshold
        self.min_messages = min_messages

    def starts_new_page(self, page: Sequence[Unit], unit: Unit, count_message: CountMessage) -> bool:
        if sum(len(u.messages) for u in page) < self.min_messages:
            return False
        new_terms = set(content_terms(unit.text))
        if not new_terms:
            return False
        page_terms = {t for u in page[-self.min_messages :] for t in content_terms(u.text)}
        return len(new_terms & page_terms) / len(new_terms) < self.threshold


BOUNDARIES: dict[str, Callable[..., BoundaryStrategy]] = {
    "fixed_N": FixedSizeBoundary,
    "tokens_N": TokenSizeBoundary,
    "exchange": ExchangeBoundary,
    "session": SessionBoundary,
    "topic_shift": TopicShiftBoundary,
}


def get_boundary(boundary: str | BoundaryStrategy) -> BoundaryStrategy:
    """A strategy from its name (``fixed_20``, ``tokens_800``, ``exchange``, ...) or as given."""
    if isinstance(boundary, BoundaryStrategy):
        return boundary
    sized = re.fullmatch(r"(fixed|tokens)_(\d+)", str(boundary))
    if sized:
        return BOUNDARIES[f"{sized.group(1)}_N"](int(sized.group(2)))
    if boundary in BOUNDARIES and not boundary.endswith("_N"):
        return BOUNDARIES[boundary]()
    available = ", ".join(repr(name) for name in BOUNDARIES)
    raise ValueError(
        f"Unknown boundary {boundary!r}. Available: {available} (N a positive integer, e.g. 'fixed_20')."
    )
