"""Phase 7: the new view, the `add_messages` updates that turn the input into it, and what the
step reports (tokens, what is protected, over budget)."""

from __future__ import annotations

from langchain_core.messages import BaseMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langmem_paging.step.context import StepContext
from langmem_paging.step.protect import protected_tokens, protected_units
from langmem_paging.step.result import PagingResult

__all__ = ["finish"]


def finish(ctx: StepContext) -> PagingResult:
    """Build the view and its updates from the step's replacements; record the totals in the state."""
    result, state = ctx.result, ctx.state
    if ctx.replace:
        view: list[BaseMessage] = []
        updates: list[BaseMessage] = []
        for key, message in zip(ctx.keys, ctx.messages, strict=True):
            inserted = [m for k in ctx.inserted.get(key, ()) if (m := ctx.replace[k]) is not None]
            view += inserted
            ctx.rewritten |= bool(inserted)  # add_messages can only append a message with a new id
            new = ctx.replace.get(key, message)
            if new is not None:
                view.append(new)
            if key in ctx.replace and message.id:
                updates.append(new if new is not None else RemoveMessage(id=message.id))
        result.view, result.updates = view, updates
        ctx.total = ctx.measured_total()
    if ctx.rewritten:  # messages were inserted: add_messages can only append, so the list is rewritten
        result.updates = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *result.view]
    result.tokens = ctx.total
    result.protected_tokens = protected_tokens(ctx)
    result.over_budget = ctx.total > ctx.options.budget
    if result.over_budget:
        result.protected = protected_units(ctx)
    if result.over_budget and not state.warned:
        state.warned = True
        result.first_over_budget = True
    state.tokens, state.budget, state.protected = ctx.total, ctx.options.budget, result.protected_tokens
    state.encoding = ctx.options.encoding or state.encoding
    return result
