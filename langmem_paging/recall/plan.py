"""What the model asked `recall` for, normalized: it never raises for what the model sends.

Example:
    >>> plan = plan_recall(["[p3:Farid greyhound]", 7, "c2", "p3", "banana"], "  Farid's dog ")
    >>> plan.page_ids, plan.cluster_ids, plan.malformed, plan.query
    (['p3', 'p7'], ['c2'], ["'banana'"], "Farid's dog")
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from langmem_paging.core.library_messages import BOOKMARK_PATTERN

__all__ = ["RecallPlan", "plan_recall"]

_ID = re.compile(r"^[pc][1-9]\d*$")
_CLUSTER_MARK = re.compile(r"\[(c[1-9]\d*):")


@dataclass
class RecallPlan:
    """A recall request after normalizing what the model sent."""

    page_ids: list[str] = field(default_factory=list)
    """Well-formed page ids (``p3``), deduplicated, in the order asked."""
    cluster_ids: list[str] = field(default_factory=list)
    """Well-formed cluster ids (``c2``)."""
    malformed: list[str] = field(default_factory=list)
    """What the model sent that is not an id."""
    query: str | None = None
    """Search text, when given."""
    part: int | None = None
    """Which part of an oversized page (1-based)."""


def plan_recall(page_ids: Any, query: Any, part: Any = None) -> RecallPlan:
    """Accept ``["p3"]``, ``"p3, c2"``, ``[3]``, or pasted bookmarks ``"[p3:kw,...]"``; never raise."""
    plan = RecallPlan(query=query.strip() if isinstance(query, str) and query.strip() else None)
    if isinstance(part, int) and not isinstance(part, bool) and part >= 1:
        plan.part = part
    for item in _items(page_ids):
        if not isinstance(item, str):
            plan.malformed.append(repr(item)[:40])
            continue
        for piece in _pieces(item):
            _classify(plan, piece)
    return plan


def _items(page_ids: Any) -> list[Any]:
    """The model's `page_ids` as a list; bare numbers are page numbers."""
    if page_ids is None:
        raw: list[Any] = []
    elif isinstance(page_ids, (list, tuple)):
        raw = list(page_ids)
    else:
        raw = [page_ids]
    return [f"p{item}" if isinstance(item, int) and not isinstance(item, bool) else item for item in raw]


def _pieces(item: str) -> list[str]:
    """The ids in one string: those of pasted bookmarks, else the words it lists."""
    marks = [m.group(1) for m in BOOKMARK_PATTERN.finditer(item)] + _CLUSTER_MARK.findall(item)
    pieces = marks or [p for p in re.split(r"[\s,;]+", item) if p]
    out = []
    for piece in pieces:
        piece = piece.strip().strip("'\"[]").lower()
        out.append(f"p{piece}" if piece.isdigit() else piece)
    return out


def _classify(plan: RecallPlan, piece: str) -> None:
    if not _ID.match(piece):
        plan.malformed.append(repr(piece)[:40])
    elif piece.startswith("p") and piece not in plan.page_ids:
        plan.page_ids.append(piece)
    elif piece.startswith("c") and piece not in plan.cluster_ids:
        plan.cluster_ids.append(piece)
