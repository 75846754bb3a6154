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

from langmem_paging.messages import dump_messages, library_mark, load_messages, message_keys
from langmem_paging.state import PagingState

__all__ = ["last_key", "render_view", "skeleton_of"]


def render_view(history: Sequence[BaseMessage], state: PagingState) -> list[BaseMessage]:
    """The view the model saw last, brought up to date with `history`."""
    if state.skeleton is None:
        return list(history)
    keys = message_keys(history)
    by_key = dict(zip(keys, history))
    view: list[BaseMessage] = []
    for entry in state.skeleton:
        if isinstance(entry, str):
            if entry in by_key:
                view.append(by_key[entry])
        else:
            view.extend(load_messages([entry]))
    cut = _last_seen(keys, state)
    view.extend(history[cut + 1 :])
    return view


def _last_seen(keys: Sequence[str], state: PagingState) -> int:
    """Index of the newest history message the last step saw (-1: none of it is left)."""
    wanted = [state.seen] if state.seen else []
    wanted += [e for e in reversed(state.skeleton or []) if isinstance(e, str)]
    for target in wanted:
        for i in range(len(keys) - 1, -1, -1):
            if keys[i] == target:
                return i
    return -1


def skeleton_of(view: Sequence[BaseMessage], history: Sequence[BaseMessage]) -> list[Any]:
    """The skeleton of a view: history keys for history messages (matched by identity: the
    view holds the history's own message objects), whole dicts for the library's own."""
    key_of = {id(m): k for m, k in zip(history, message_keys(history))}
    return [key_of[id(m)] if id(m) in key_of and not library_mark(m) else dump_messages([m])[0] for m in view]


def last_key(history: Sequence[BaseMessage]) -> str | None:
    """The key of the newest history message (what the next render starts after)."""
    return message_keys(history)[-1] if history else None
