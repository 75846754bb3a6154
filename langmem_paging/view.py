"""View mode: the state keeps the whole history; the paged view is kept as a skeleton.

The skeleton (in the paging state) lists the view the last step produced: ids of
history messages it showed, and whole messages for what the library put there
(bookmarks, cluster bookmarks, shrunk recall results, paged tool results). Messages
the history gained since (after the newest one the step saw) are appended; a message
edited in the history shows its new version. Everything else in the history was
paged out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langmem_paging.messages import dump_messages, library_mark, load_messages
from langmem_paging.state import PagingState

__all__ = ["render_view", "skeleton_of"]


def render_view(history: Sequence[BaseMessage], state: PagingState) -> list[BaseMessage]:
    """The view the model saw last, brought up to date with `history`."""
    if state.skeleton is None:
        return list(history)
    by_id = {m.id: m for m in history if m.id}
    view: list[BaseMessage] = []
    for entry in state.skeleton:
        if isinstance(entry, str):
            if entry in by_id:
                view.append(by_id[entry])
        else:
            view.extend(load_messages([entry]))
    cut = _last_seen(history, state)
    view.extend(history[cut + 1 :])
    return view


def _last_seen(history: Sequence[BaseMessage], state: PagingState) -> int:
    """Index of the newest history message the last step saw (-1: none of it is left)."""
    wanted = [state.seen] if state.seen else []
    wanted += [e for e in reversed(state.skeleton or []) if isinstance(e, str)]
    for target in wanted:
        for i in range(len(history) - 1, -1, -1):
            if history[i].id == target:
                return i
    return -1


def skeleton_of(view: Sequence[BaseMessage]) -> list[Any]:
    """The skeleton of a view: ids for history messages, dicts for the library's own."""
    return [dump_messages([m])[0] if (library_mark(m) or not m.id) else m.id for m in view]
