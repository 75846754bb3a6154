"""Phase 3a: a tool result too large for the context is paged as it arrives, behind a stub that
names the tool, its arguments and the size (same message id and call id, so the tool pair stays
valid); its page is evicted at once: the stub is its bookmark."""

from __future__ import annotations

from langchain_core.messages import ToolMessage

from langmem_paging.effects import Flow
from langmem_paging.library_messages import stub_is_shorter, tool_result_stub
from langmem_paging.messages import Unit, library_mark, recall_copy_pages
from langmem_paging.step.context import StepContext
from langmem_paging.step.form import Draft, form_pages

__all__ = ["page_large_results"]


def page_large_results(ctx: StepContext) -> Flow[None]:
    """Page every tool result over `large_result_tokens` not paged yet, if its stub is shorter."""
    arrivals = [(i, result) for i, result in _large_results(ctx) if stub_is_shorter(
        result, ctx.calls.get(result.tool_call_id), ctx.counts[i], ctx.options.count_message)]
    if not arrivals:
        return
    drafts = [Draft([Unit(i, (result,))], kind="tool_result") for i, result in arrivals]
    pages = yield from form_pages(ctx, drafts)
    for (i, result), page in zip(arrivals, pages, strict=True):
        stub = tool_result_stub(page.id, result, ctx.calls.get(result.tool_call_id), page.token_count)
        ctx.replace[ctx.keys[i]] = stub
        ctx.state.pages.pop(page.id)
        ctx.total += ctx.options.count_message(stub) - ctx.counts[i]
        ctx.result.evicted.append(page.id)


def _large_results(ctx: StepContext) -> list[tuple[int, ToolMessage]]:
    """Tool results over `large_result_tokens` not paged yet (each once, as they arrive), with their
    index in the view."""
    limit = ctx.options.large_result_tokens
    if limit is None:
        return []
    formed = {k for page in ctx.state.pages.values() for k in page.ids}
    return [(i, message) for i, message in enumerate(ctx.messages)
            if isinstance(message, ToolMessage) and message.id and ctx.counts[i] > limit
            and ctx.keys[i] not in formed and not library_mark(message) and not recall_copy_pages(message)]
