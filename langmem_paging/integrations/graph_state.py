"""What a paging step reads from a graph's state and writes back to it (middleware and node alike).

In replace mode the step pages the state's messages and writes `add_messages` updates; in view
mode the state keeps the whole history, the step pages the view the last step left (rendered
from the skeleton in the paging state), and only the paging state is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langchain_core.messages import BaseMessage

from langmem_paging.core.state import STATE_KEY, PagingState
from langmem_paging.core.view import FRONT, key_at, render_view, skeleton_of
from langmem_paging.step import PagingResult

__all__ = ["prepare_view", "state_update"]

Mode = Literal["replace", "view"]


def prepare_view(messages: Sequence[BaseMessage], state: Any, mode: Mode) -> tuple[list[BaseMessage], dict[int, int]]:
    """The view a step starts from: the messages themselves (replace) or the rendered skeleton
    (view), and in view mode where each of its history messages is."""
    if mode == "replace":
        return list(messages), {}
    return render_view(messages, PagingState.from_value(state))


def state_update(result: PagingResult, messages: Sequence[BaseMessage], state: Any, mode: Mode,
                 positions: dict[int, int] | None = None) -> dict[str, Any]:
    """The graph update after a step: the new paging state (if it changed) and, in replace mode,
    the message updates."""
    if mode == "view":
        result.state.skeleton = skeleton_of(result.view, messages, positions or {})
        result.state.seen = key_at(messages, len(messages) - 1) if messages else None
        result.state.seen_index = len(messages) - 1
        result.state.head = key_at(messages, 0) if messages else None
        result.state.front = [key_at(messages, i) for i in range(1, min(len(messages), FRONT + 1))]
    update: dict[str, Any] = {}
    value = result.state.to_value()
    if value != state:
        update[STATE_KEY] = value
    if mode == "replace" and result.updates:
        update["messages"] = result.updates
    return update
