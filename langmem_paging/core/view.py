"""View mode: the state keeps the whole history; the paged view is kept as a skeleton.

The skeleton (in the paging state) lists the view the last step produced: ids of
history messages it showed, and whole messages for what the library put there
(bookmarks, cluster bookmarks, shrunk recall results, paged tool results). Messages
the history gained since (after the newest one the step saw) are appended; a message
edited in the history shows its new version. Everything else in the history was
paged out. A library message shows only while the history holds its id (the message it
stands for), and only while that message is the one it was made for: a new message that took
the id (LangGraph's `add_messages` replaces by id) shows in its place, as in replace mode. When
the history was rewritten (``REMOVE_ALL_MESSAGES``: a first message the last step never saw),
the view is the new history itself, and the next step pages it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langmem_paging.core.messages import dump_messages, load_messages, message_keys
from langmem_paging.core.state import PagingState

__all__ = ["ANCHOR", "FRONT", "fingerprint", "key_at", "render_view", "skeleton_of"]

ANCHOR = "anchor"
"""Key of a skeleton's library entry: ``[index, fingerprint]`` of the history message whose id the
stand-in has (its anchor), or None for a stand-in under an id of its own (shown again after a new
message took its anchor's id: `langmem_paging.step.displaced`). Entries an older version wrote
have no such key and show while the history holds their id."""

FRONT = 15
"""How many messages after the first the state remembers: removing up to this many from the front
of the history (LangGraph's "delete old messages") is told apart from a rewrite. Removing more at
once, up to a message the last step had paged out, is taken for a rewrite: the new history is paged
as it comes."""


def key_at(history: Sequence[BaseMessage], index: int) -> str:
    """`message_keys(history)[index]`, walking back only over messages without an id."""
    message = history[index]
    if message.id:
        return message.id
    return _positional_key(history, index)


def _positional_key(history: Sequence[BaseMessage], index: int) -> str:
    """The key of ``history[index]`` had it no id: the nearest earlier id and the distance to it.
    A message a step saw without an id (the error result `create_agent` adds for a malformed
    call) gets its id only when the graph merges it into the state."""
    run = 1
    for i in range(index - 1, -1, -1):
        if history[i].id:
            return f"{history[i].id}+{run}"
        run += 1
    return f"^+{run}"


def render_view(
    history: Sequence[BaseMessage], state: PagingState
) -> tuple[list[BaseMessage], dict[int, int]]:
    """The view the model saw last, brought up to date with `history`, and where each of its
    history messages is (object id -> index). Skeleton entries carry the index they had: the
    work is proportional to the view unless the history was rewritten (then one scan)."""
    if state.skeleton is None:
        return list(history), {id(m): i for i, m in enumerate(history)}
    fast = _render_by_position(history, state)
    view, positions = fast if fast is not None else _render_by_scan(history, state)
    return _without_taken(view, positions, history), positions


def _without_taken(
    view: list[BaseMessage], positions: dict[int, int], history: Sequence[BaseMessage]
) -> list[BaseMessage]:
    """The view without a stand-in whose own id (`h3~p2`) a history message in the view now has:
    the app sent a message with that id, which `add_messages` appended (the history never held
    it), so the stand-in is displaced as in replace mode, and the step shows it again."""
    ours = {id(m) for m in view if id(m) not in positions or history[positions[id(m)]] is not m}
    if not ours:
        return view
    taken = {m.id for m in view if id(m) not in ours} & {m.id for m in view if id(m) in ours}
    return [m for m in view if not (id(m) in ours and m.id in taken)] if taken else view


def _render_by_position(
    history: Sequence[BaseMessage], state: PagingState
) -> tuple[list[BaseMessage], dict[int, int]] | None:
    view: list[BaseMessage] = []
    positions: dict[int, int] = {}
    for entry in state.skeleton or ():
        if isinstance(entry, dict):
            anchor = entry.get(ANCHOR)
            if anchor is not None and not (
                anchor[0] < len(history) and key_at(history, anchor[0]) == _entry_id(entry)
            ):
                return None
            _show_entry(entry, history, anchor[0] if anchor is not None else None, view, positions)
            continue
        key, index = entry
        if index >= len(history) or not _is_at(history, index, key):
            return None
        view.append(history[index])
        positions[id(history[index])] = index
    seen = state.seen_index
    if state.seen is not None and (seen >= len(history) or not _is_at(history, seen, state.seen)):
        return None
    for index in range((seen + 1) if state.seen is not None else 0, len(history)):
        view.append(history[index])
        positions[id(history[index])] = index
    return view, positions


def _is_at(history: Sequence[BaseMessage], index: int, key: str) -> bool:
    return key_at(history, index) == key or ("+" in key and _positional_key(history, index) == key)


def _render_by_scan(
    history: Sequence[BaseMessage], state: PagingState
) -> tuple[list[BaseMessage], dict[int, int]]:
    if _rewritten(history, state):
        return list(history), {id(m): i for i, m in enumerate(history)}
    keys = message_keys(history)
    at = {_positional_key(history, i): i for i in range(len(history)) if history[i].id}
    at.update({k: i for i, k in enumerate(keys)})
    view: list[BaseMessage] = []
    positions: dict[int, int] = {}
    for entry in state.skeleton or ():
        if isinstance(entry, dict):
            ident = _entry_id(entry)
            if ANCHOR in entry and entry[ANCHOR] is None:
                _show_entry(entry, history, None, view, positions)
            elif ident in at:
                _show_entry(entry, history, at[ident] if ANCHOR in entry else None, view, positions)
        elif entry[0] in at:
            index = at[entry[0]]
            view.append(history[index])
            positions[id(history[index])] = index
    cut = _last_seen(at, state)
    for index in range(cut + 1, len(history)):
        view.append(history[index])
        positions[id(history[index])] = index
    return view, positions


def _show_entry(
    entry: dict[str, Any],
    history: Sequence[BaseMessage],
    index: int | None,
    view: list[BaseMessage],
    positions: dict[int, int],
) -> None:
    """Add a library entry to the view: the stand-in, or, when the history message under it
    (at `index`) is no longer the one it was made for, that message in its place, as
    `add_messages` puts a message whose id a stand-in has in the stand-in's place (replace mode)."""
    if index is None:
        view.extend(load_messages([entry]))
        return
    if fingerprint(history[index]) != entry[ANCHOR][1]:
        view.append(history[index])
        positions[id(history[index])] = index
        return
    (message,) = load_messages([entry])
    view.append(message)
    positions[id(message)] = index  # where its anchor is: the next skeleton keeps it


def fingerprint(message: BaseMessage) -> str:
    """What tells a history message from another that took its id (or an edit of it): a digest
    of its type and content (text hashed as it is: no repr of a long tool result per call)."""
    h = hashlib.blake2b(message.type.encode(), digest_size=8)
    content = message.content
    h.update(content.encode("utf-8", "surrogatepass") if isinstance(content, str) else repr(content).encode())
    return h.hexdigest()


def _entry_id(entry: dict[str, Any]) -> str | None:
    """Id of a library message in the skeleton: the id of the history message it stands for."""
    ident = entry.get("data", {}).get("id")
    return ident if isinstance(ident, str) else None


def _rewritten(history: Sequence[BaseMessage], state: PagingState) -> bool:
    """True when the history starts with a message the last step neither started with nor showed:
    it was replaced (``REMOVE_ALL_MESSAGES``, say by a summary), not edited or trimmed (a first
    message among the ones that followed the head was there before: messages were removed)."""
    if not history or state.head is None:
        return False
    first = key_at(history, 0)
    if first == state.head or first in state.front:
        return False
    known = {_entry_id(e) if isinstance(e, dict) else e[0] for e in state.skeleton or []}
    return first not in known


def _last_seen(at: dict[str, int], state: PagingState) -> int:
    """Index of the newest history message the last step saw (-1: none of it is left)."""
    wanted = [state.seen] if state.seen else []
    wanted += [e[0] for e in reversed(state.skeleton or []) if not isinstance(e, dict)]
    for target in wanted:
        if target in at:
            return at[target]
    return -1


def skeleton_of(
    view: Sequence[BaseMessage], history: Sequence[BaseMessage], positions: dict[int, int]
) -> list[Any]:
    """The skeleton of a view: ``[key, index]`` for history messages (the view holds the
    history's own message objects, found in `positions`), whole dicts for the library's own.

    A history message is the app's whatever metadata it carries (a pinned message, a copied
    bookmark mark): kept as a key, so an edit of it shows its new version. A stand-in under the
    id of a history message (a bookmark, digest, stub: its anchor) keeps where that message is
    and its `fingerprint` (`ANCHOR`): a new message that takes the id, or an edit, shows in its
    place at the next render. The work is one fingerprint per stand-in."""
    out: list[Any] = []
    anchors: dict[str, int] | None = None
    for message in view:
        index = positions.get(id(message))
        if index is not None and history[index] is message:
            out.append([key_at(history, index), index])
            continue
        entry = dump_messages([message])[0]
        if index is None and message.id:
            if anchors is None:  # stand-ins made by this step: where the message they replaced is
                anchors = {key_at(history, i): i for i in positions.values()}
            index = anchors.get(message.id)
        anchored = index is not None and key_at(history, index) == message.id
        entry[ANCHOR] = [index, fingerprint(history[index])] if anchored and index is not None else None
        out.append(entry)
    return out
