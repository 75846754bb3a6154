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

__all__ = ["key_at", "render_view", "skeleton_of"]


def key_at(history: Sequence[BaseMessage], index: int) -> str:
    """`message_keys(history)[index]`, walking back only over messages without an id."""
    message = history[index]
    if message.id:
        return message.id
    run = 1
    for i in range(index - 1, -1, -1):
        if history[i].id:
            return f"{history[i].id}+{run}"
        run += 1
    return f"^+{run}"


def render_view(history: Sequence[BaseMessage], state: PagingState) -> tuple[list[BaseMessage], dict[int, int]]:
    """The view the model saw last, brought up to date with `history`, and where each of its
    history messages is (object id -> index). Skeleton entries carry the index they had: the
    work is proportional to the view unless the history was rewritten (then one scan)."""
    if state.skeleton is None:
        return list(history), {id(m): i for i, m in enumerate(history)}
    fast = _render_by_position(history, state)
    return fast if fast is not None else _render_by_scan(history, state)


def _render_by_position(history, state):
    view, positions = [], {}
    for entry in state.skeleton:
        if isinstance(entry, dict):
            view.extend(load_messages([entry]))
            continue
        key, index = entry
        if index >= len(history) or key_at(history, index) != key:
            return None
        view.append(history[index])
        positions[id(history[index])] = index
    seen = state.seen_index
    if state.seen is not None and (seen >= len(history) or key_at(history, seen) != state.seen):
        return None
    for index in range((seen + 1) if state.seen is not None else 0, len(history)):
        view.append(history[index])
        positions[id(history[index])] = index
    return view, positions


def _render_by_scan(history, state):
    keys = message_keys(history)
    at = {k: i for i, k in enumerate(keys)}
    view, positions = [], {}
    for entry in state.skeleton:
        if isinstance(entry, dict):
            view.extend(load_messages([entry]))
        elif entry[0] in at:
            index = at[entry[0]]
            view.append(history[index])
            positions[id(history[index])] = index
    cut = _last_seen(keys, state)
    for index in range(cut + 1, len(history)):
        view.append(history[index])
        positions[id(history[index])] = index
    return view, positions


def _last_seen(keys: Sequence[str], state: PagingState) -> int:
    """Index of the newest history message the last step saw (-1: none of it is left)."""
    wanted = [state.seen] if state.seen else []
    wanted += [e[0] for e in reversed(state.skeleton or []) if not isinstance(e, dict)]
    for target in wanted:
        for i in range(len(keys) - 1, -1, -1):
            if keys[i] == target:
                return i
    return -1


def skeleton_of(view: Sequence[BaseMessage], history: Sequence[BaseMessage],
                positions: dict[int, int]) -> list[Any]:
    """The skeleton of a view: ``[key, index]`` for history messages (the view holds the
    history's own message objects, found in `positions`), whole dicts for the library's own."""
    out: list[Any] = []
    for message in view:
        index = positions.get(id(message))
        if index is not None and not library_mark(message):
            out.append([key_at(history, index), index])
        else:
            out.append(dump_messages([message])[0])
    return out
