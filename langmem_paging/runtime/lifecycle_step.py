"""The next step follows a forget: what a branch's state shows, corrected from the records.

Every step reads the thread's lifecycle record (`ReadLifecycle`, one read). When its generation is
not the one the branch's state was built at, a forget happened since (by any worker, the command
line, or a forget whose state write failed), and `follow_lifecycle` corrects the view and the
``paging`` value the step starts from with `forget_in_state`, fed from the records of the pages that
hold the forgotten messages and of the cluster roots the state shows: never from what one forget
removed, so it converges whatever was cut short. Its reads follow what the state shows, never the
history; a state at the record's generation reads nothing more. (See `lifecycle_state` for the
optional write at forget time.)
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from langmem_paging.core.effects import ask
from langmem_paging.core.messages import rewrites_all
from langmem_paging.core.records import page_number
from langmem_paging.core.state import STATE_KEY, PagingState
from langmem_paging.recall.io import LoadClusters
from langmem_paging.runtime.thread_io import ThreadFlow
from langmem_paging.step.io import LoadPages
from langmem_paging.step.result import PagingValue
from langmem_paging.storage.lifecycle import Forgotten, Lifecycle, forget_in_state, merged_messages

__all__ = ["follow_lifecycle", "held_generation", "with_replaced"]


def held_generation(state: PagingValue) -> str | None:
    """The lifecycle generation a ``paging`` value (or `PagingState`) was built at (no parsing)."""
    if isinstance(state, PagingState):
        return state.lifecycle
    return state.get("lifecycle") if isinstance(state, dict) else None


def follow_lifecycle(
    view: Sequence[BaseMessage], state: PagingValue, lifecycle: Lifecycle | None
) -> ThreadFlow[tuple[Sequence[BaseMessage], PagingValue, list[BaseMessage]]]:
    """The view and ``paging`` value a step starts from once they agree with the thread's
    `lifecycle` record, and the messages replaced in the view (for the graph update). Unchanged,
    with no read, when the state was built at the record's generation or nothing was forgotten."""
    if lifecycle is None or not lifecycle.forgotten or held_generation(state) == lifecycle.generation:
        return view, state, []
    listed = sorted({p for pages in lifecycle.forgotten.values() for p in pages}, key=page_number)
    pages = (yield from ask(LoadPages(listed))) if listed else {}
    roots = list(PagingState.from_value(state).clusters)
    nodes = (yield from ask(LoadClusters(roots))) if roots else {}
    first, *earlier = lifecycle.forgotten
    forgot = Forgotten(
        first,
        pages=list(pages.values()),
        above=list(nodes.values()),
        earlier=earlier,
        generation=lifecycle.generation,
    )
    update = forget_in_state({"messages": view, STATE_KEY: state}, forgot)
    replaced: list[BaseMessage] = update.get("messages", [])
    return merged_messages(view, replaced), update.get(STATE_KEY, state), replaced


def with_replaced(updates: list[BaseMessage], replaced: Sequence[BaseMessage]) -> list[BaseMessage]:
    """A step's `add_messages` updates with the messages `follow_lifecycle` replaced in its view
    (those the step itself updated or rewrote already carry the replacement)."""
    if not replaced or rewrites_all(updates):
        return updates
    updated = {m.id for m in updates}
    return [*(m for m in replaced if m.id not in updated), *updates]
