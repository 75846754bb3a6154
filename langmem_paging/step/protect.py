"""Phase 2: what nothing may evict.

Protected: system and pinned messages, the newest user message, the latest tool group of the
turn (an AI message with all its results; before any, everything after the newest user
message), a message that took a stand-in's id this step, calls not answered yet, the library's
own stand-ins, the results of the last recall, and messages with no id, in either mode (a page
brings its messages back by id; in replace mode no update could remove one from the state
either). Only the current turn's unit is protected for being recent: an earlier turn's malformed
call and its error result page like any other unit (while that result has no id yet,
`step.malformed` shrinks the call instead).
"""

from __future__ import annotations

from typing import Any, cast

from langchain_core.messages import AIMessage

from langmem_paging.core.messages import Unit, is_pinned, split_units
from langmem_paging.step.context import StepContext
from langmem_paging.step.result import Protected

__all__ = ["protect", "protected_tokens", "protected_units", "unremovable"]


def protect(ctx: StepContext) -> None:
    """Cut the view into units and mark the protected ones; index the view's tool calls."""
    ctx.units = split_units(ctx.messages)
    ctx.latest_group = _latest_tool_group(ctx)
    library = ctx.library_keys()
    ctx.protected = {
        k: why for k, unit in enumerate(ctx.units) if (why := _why(ctx, k, unit, library)) is not None
    }
    for message in ctx.messages:
        if not isinstance(message, AIMessage):  # (a getattr on another type costs a pydantic miss)
            continue
        for call in cast(list[dict[str, Any]], message.tool_calls):
            if call.get("id"):
                ctx.calls[call["id"]] = call


def _why(ctx: StepContext, k: int, unit: Unit, library: set[str]) -> str | None:
    """Why nothing may evict unit `k` (None: it may be paged)."""
    return (
        _current_turn(ctx, k, unit, ctx.latest_group)
        or _chosen_kept(ctx, unit, library)
        or ("it has no id" if _without_id(unit) else None)
    )


def _latest_tool_group(ctx: StepContext) -> int | None:
    """Index of the unit holding the turn's latest tool call, if the turn made one."""
    if ctx.newest_user is None:
        return None
    for k in range(len(ctx.units) - 1, -1, -1):
        unit = ctx.units[k]
        if unit.start <= ctx.newest_user:
            return None
        first = unit.messages[0]
        if len(unit.messages) > 1 or (isinstance(first, AIMessage) and first.tool_calls):
            return k
    return None


def _current_turn(ctx: StepContext, k: int, unit: Unit, latest_group: int | None) -> str | None:
    """The newest user message, the latest tool group and what follows it (or, before the turn
    made a call, everything after the user message); with no user message, the last unit."""
    newest = ctx.newest_user
    if newest is None:
        return "the last message" if k == len(ctx.units) - 1 else None
    if unit.start <= newest < unit.end:
        return "the newest user message"
    if latest_group is not None:
        return "the turn's latest tool group" if k >= latest_group else None
    return "after the newest user message" if unit.start > newest else None


def _chosen_kept(ctx: StepContext, unit: Unit, library: set[str]) -> str | None:
    """Kept by what it is: unanswered, ours, pinned, just recalled, or new where a stand-in was (a
    message that took a stand-in's id: the app just sent it, so the model sees it at least once)."""
    keys = ctx.keys[unit.start : unit.end]
    if not unit.answered:
        return "a call not answered yet"
    if keys[0] in library:
        return _OURS
    if any(is_pinned(m) for m in unit.messages):
        return "pinned"
    if not ctx.recalled_now.isdisjoint(keys):
        return "the last recall's result"
    if not ctx.inserted.keys().isdisjoint(keys):
        return "it took a stand-in's id this step"
    return None


_OURS = "a stand-in of the library's"
"""Why a bookmark, digest or cluster bookmark is kept: counted as the step leaves the stand-ins, not
as it was given them (a bookmark may fold into a cluster bookmark in the step)."""


def _without_id(unit: Unit) -> bool:
    return any(not m.id for m in unit.messages)


def unremovable(ctx: StepContext, k: int, unit: Unit) -> bool:
    """True for a unit of an earlier turn that only a message without an id keeps (no update could
    remove it): nothing else protects it."""
    return (
        _without_id(unit)
        and not _current_turn(ctx, k, unit, ctx.latest_group)
        and not _chosen_kept(ctx, unit, ctx.library_keys())
    )


def protected_units(ctx: StepContext) -> list[Protected]:
    """The protected units but the library's stand-ins (counted apart, as bookmarks), each with why
    nothing may evict it and its tokens as the step was given it: what an over-budget step names."""
    spans = [(ctx.units[k].start, ctx.units[k].end, why) for k, why in sorted(ctx.protected.items())]
    return [Protected(tuple(ctx.keys[a:b]), why, sum(ctx.counts[a:b])) for a, b, why in spans if why != _OURS]


def protected_tokens(ctx: StepContext) -> int:
    """Tokens no eviction can free: the protected units (measured on the input) and the
    bookmarks and clusters the step leaves (an estimate good enough to warn and size recalls)."""
    state = ctx.state
    return (
        sum(p.tokens for p in protected_units(ctx))
        + sum(s.tokens for s in state.shown.values())
        + sum(c.tokens for c in state.clusters.values())
    )
