"""Phase 3a: tool results paged as they arrive, behind a stub that names the tool, its arguments and
the size (same message id and call id, so the tool pair stays valid); the page is evicted at once:
the stub is its bookmark.

Two rules decide which results go: a result larger than `large_result_tokens` (a share of the
budget), and, when the turn's latest tool group (an AI message and the results of all the calls
it made at once) does not fit the room the budget leaves beside everything else nothing may evict,
its largest results until it does. So a turn with any mix of parallel calls stays in budget: the
results are sized together, not each against the whole budget.
"""

from __future__ import annotations

from langchain_core.messages import ToolMessage

from langmem_paging.core.library_messages import stub_is_shorter, tool_result_stub
from langmem_paging.core.messages import Unit, library_mark, recall_copy_pages
from langmem_paging.step.context import StepContext
from langmem_paging.step.form import Draft, form_pages
from langmem_paging.step.io import Flow

__all__ = ["page_large_results", "trim_latest_group"]

Arrival = tuple[int, ToolMessage]


def page_large_results(ctx: StepContext) -> Flow[None]:
    """Page every tool result over `large_result_tokens`, then the latest group's largest results
    until the group fits, each only if its stub is shorter."""
    limit = ctx.options.large_result_tokens
    arrivals = [(i, r) for i, r in _pageable_results(ctx) if limit is not None and ctx.counts[i] > limit]
    arrivals += _over_the_groups_room(ctx, [a for a in _latest_group_results(ctx) if a not in arrivals])
    arrivals = [(i, r) for i, r in arrivals if _stub_saves(ctx, i, r)]
    yield from _page_on_arrival(ctx, arrivals)


def trim_latest_group(ctx: StepContext) -> Flow[None]:
    """After the step, still over budget (measured): the latest group's largest results not paged
    yet go behind stubs until the view fits (the room estimate at arrival did not know the bookmarks
    eviction would add)."""
    over = ctx.measured_total() - ctx.options.budget
    if over <= 0:
        return
    count = ctx.options.count_message
    chosen: list[Arrival] = []
    for i, result in sorted(_latest_group_results(ctx), key=lambda a: (-ctx.counts[a[0]], a[0])):
        if over <= 0:
            break
        if ctx.keys[i] in ctx.replace or not _stub_saves(ctx, i, result):
            continue
        chosen.append((i, result))
        over -= ctx.counts[i] - count(
            tool_result_stub("p999999", result, ctx.calls.get(result.tool_call_id), ctx.counts[i])
        )
    yield from _page_on_arrival(ctx, chosen)


def _page_on_arrival(ctx: StepContext, arrivals: list[Arrival]) -> Flow[None]:
    if not arrivals:
        return
    drafts = [Draft([Unit(i, (result,))], kind="tool_result") for i, result in arrivals]
    pages = yield from form_pages(ctx, drafts)
    for (i, result), page in zip(arrivals, pages, strict=True):
        stub = tool_result_stub(
            page.id, result, ctx.calls.get(result.tool_call_id), page.token_count, tool=ctx.options.tool_name
        )
        ctx.replace[ctx.keys[i]] = stub
        ctx.state.pages.pop(page.id)
        ctx.total += ctx.options.count_message(stub) - ctx.counts[i]
        ctx.result.evicted.append(page.id)


def _stub_saves(ctx: StepContext, i: int, result: ToolMessage) -> bool:
    return stub_is_shorter(
        result,
        ctx.calls.get(result.tool_call_id),
        ctx.counts[i],
        ctx.options.count_message,
        tool=ctx.options.tool_name,
    )


def _pageable_results(ctx: StepContext) -> list[Arrival]:
    """Tool results not paged yet (each is paged once, as it arrives), with their index in the view:
    not the library's own (a stub, a recall result) and not part of a page already."""
    formed = {k for page in ctx.state.pages.values() for k in page.ids}
    return [
        (i, message)
        for i, message in enumerate(ctx.messages)
        if isinstance(message, ToolMessage)
        and message.id
        and ctx.keys[i] not in formed
        and not library_mark(message)
        and not recall_copy_pages(message)
    ]


def _latest_group_results(ctx: StepContext) -> list[Arrival]:
    if ctx.latest_group is None:
        return []
    unit = ctx.units[ctx.latest_group]
    return [(i, r) for i, r in _pageable_results(ctx) if unit.start <= i < unit.end]


def _over_the_groups_room(ctx: StepContext, results: list[Arrival]) -> list[Arrival]:
    """The group's largest results, while the group exceeds the room the budget leaves beside what
    nothing may evict (measured as the step has left it, stubs of larger results included)."""
    if not results:
        return []
    count = ctx.options.count_message
    mine = {i for i, _ in results}
    others = sum(
        ctx.tokens_now(i)
        for k in ctx.protected
        for i in range(ctx.units[k].start, ctx.units[k].end)
        if i not in mine
    )
    room = ctx.options.budget - others
    size = sum(ctx.counts[i] for i in mine)
    chosen: list[Arrival] = []
    for i, result in sorted(results, key=lambda a: (-ctx.counts[a[0]], a[0])):
        if size <= room:
            break
        stub = count(
            tool_result_stub(
                "p999999",
                result,
                ctx.calls.get(result.tool_call_id),
                ctx.counts[i],
                tool=ctx.options.tool_name,
            )
        )
        if stub < ctx.counts[i]:
            chosen.append((i, result))
            size += stub - ctx.counts[i]
    return chosen
