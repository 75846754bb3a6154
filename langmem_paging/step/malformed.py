"""Phase 3b: an earlier turn's malformed tool call that cannot be paged goes behind a stub.

`create_agent` answers a malformed call (`invalid_tool_calls`) with an error ToolMessage it makes
anew at every model call until the graph stores it, and makes it without an id: at the model call
after the malformed one, no update can remove that result, so its unit stays in the context
(replace mode; see `step.protect`). A malformed call's raw arguments count as they are sent, and a
model cut short while writing a large argument leaves thousands of tokens there. So, while the
step is over budget, such an AI message (the largest first) is replaced by a stub as a large tool
result is: same id and call ids (its results still answer it), the raw arguments left out, the
original in a page of its own, recallable and restored by `reconstruct_history`. By the next step
the graph has given the result an id, and the unit is paged like any other.
"""

from __future__ import annotations

from langchain_core.messages import AIMessage

from langmem_paging.core.library_messages import malformed_call_stub
from langmem_paging.core.messages import Unit, library_mark
from langmem_paging.step.context import StepContext
from langmem_paging.step.form import Draft, form_pages
from langmem_paging.step.io import Flow
from langmem_paging.step.protect import unremovable

__all__ = ["shrink_malformed"]

STUB_ID_FOR_ESTIMATES = "p999999"
"""A page id longer than any real one: a stub measured with it is never shorter than the real one."""


def shrink_malformed(ctx: StepContext) -> Flow[None]:
    """Over budget: the malformed calls of earlier turns' unremovable units behind stubs, the
    largest first, each only if its stub is shorter, until the view fits."""
    chosen: list[tuple[int, AIMessage]] = []
    over = ctx.total - ctx.options.budget
    if over <= 0:  # the usual, quiet call: no unit is looked at
        return
    for i, message in sorted(_candidates(ctx), key=lambda c: (-ctx.counts[c[0]], c[0])):
        if over <= 0:
            break
        saved = ctx.counts[i] - ctx.options.count_message(
            malformed_call_stub(STUB_ID_FOR_ESTIMATES, message, ctx.counts[i], tool=ctx.options.tool_name)
        )
        if saved > 0:
            chosen.append((i, message))
            over -= saved
    if not chosen:
        return
    drafts = [Draft([Unit(i, (message,))], kind="tool_result") for i, message in chosen]
    pages = yield from form_pages(ctx, drafts)
    for (i, message), page in zip(chosen, pages, strict=True):
        stub = malformed_call_stub(page.id, message, page.token_count, tool=ctx.options.tool_name)
        ctx.replace[ctx.keys[i]] = stub
        ctx.state.pages.pop(page.id)  # the stub shows it: it is evicted as it forms
        ctx.total += ctx.options.count_message(stub) - ctx.counts[i]
        ctx.result.evicted.append(page.id)


def _candidates(ctx: StepContext) -> list[tuple[int, AIMessage]]:
    """AI messages with malformed calls, in earlier turns' units that only their missing ids keep,
    not shrunk yet."""
    out = []
    for k in ctx.protected:
        unit = ctx.units[k]
        if not unremovable(ctx, k, unit):
            continue
        for i in range(unit.start, unit.end):
            message = ctx.messages[i]
            if (
                isinstance(message, AIMessage)
                and message.invalid_tool_calls
                and message.id
                and ctx.keys[i] not in ctx.replace
                and "paged_result" not in library_mark(message)
            ):
                out.append((i, message))
    return out
