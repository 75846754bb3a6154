"""What a paging step reads from a graph's state and config and writes back (middleware, node, recall
tool alike): `GraphCall.prepare` -> the step -> `GraphCall.update`, the thread-id lookup and the one
check for a missing ``paging`` key.

In replace mode the step pages the state's messages and writes `add_messages` updates; in view
mode the state keeps the whole history, the step pages the view the last step left (rendered
from the skeleton in the paging state), and only the paging state is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from langmem_paging.config import check_thread_id
from langmem_paging.core.messages import is_bookmark
from langmem_paging.core.state import STATE_KEY, PagingState
from langmem_paging.core.view import FRONT, key_at, render_view, skeleton_of
from langmem_paging.step import PagingResult
from langmem_paging.step.result import PagingValue

__all__ = [
    "MISSING_STATE",
    "NO_THREAD",
    "GraphCall",
    "find_thread_id",
    "paging_value",
    "prepare_view",
    "state_update",
    "thread_id_of",
]

Mode = Literal["replace", "view"]


def prepare_view(
    messages: Sequence[BaseMessage], state: PagingValue, mode: Mode
) -> tuple[list[BaseMessage], dict[int, int]]:
    """The view a step starts from: the messages themselves (replace) or the rendered skeleton
    (view), and in view mode where each of its history messages is."""
    if mode == "replace":
        return list(messages), {}
    return render_view(messages, PagingState.from_value(state))


def state_update(
    result: PagingResult,
    messages: Sequence[BaseMessage],
    state: PagingValue,
    mode: Mode,
    positions: dict[int, int] | None = None,
) -> dict[str, Any]:
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


MISSING_STATE = (
    "The graph state has no `paging` key, so paging cannot keep its state in the checkpoint (every turn "
    "would page the history again). Use `langmem_paging.PagingMessagesState` as the state schema (or add "
    "`paging: NotRequired[PagingChannel]` to yours); `create_agent` with `PagingMiddleware` does this "
    "for you."
)
"""The one error for a graph whose state has no ``paging`` channel."""

NO_THREAD = (
    "Paging needs a thread: invoke the graph with config={'configurable': {'thread_id': '...'}} "
    "(and a checkpointer)."
)
"""The one error for a run without a thread id."""


def find_thread_id(
    config: RunnableConfig | Mapping[str, Any] | None = None, runtime: Any = None
) -> str | None:
    """The running graph's thread id, from a runtime (its execution info), else a config, else the
    config of the running graph; None when the run has none."""
    info = getattr(runtime, "execution_info", None)
    thread_id = getattr(info, "thread_id", None)
    if not thread_id:
        thread_id = ((config or {}).get("configurable") or {}).get("thread_id")
    if not thread_id and config is None:
        from langgraph.config import get_config

        try:
            thread_id = get_config().get("configurable", {}).get("thread_id")
        except RuntimeError:  # outside a graph run
            thread_id = None
    return check_thread_id(str(thread_id)) if thread_id not in (None, "") else None


def thread_id_of(runtime: Any = None, config: RunnableConfig | Mapping[str, Any] | None = None) -> str:
    """`find_thread_id`, required.

    Raises:
        ValueError: When the run has no thread id (`NO_THREAD`), or one no store can key.
    """
    thread_id = find_thread_id(config, runtime)
    if thread_id is None:
        raise ValueError(NO_THREAD)
    return thread_id


def paging_value(
    state: Mapping[str, Any], messages_key: str = "messages", *, paged_before: bool = False
) -> PagingValue:
    """The ``paging`` value of a graph state (None before the first step wrote one).

    A state without the key whose messages hold a bookmark was paged by a step whose update the
    graph dropped: its schema has no ``paging`` channel. The scan only runs while the key is absent,
    that is while nothing was paged yet, when the messages fit the budget: it never grows with the
    history. `paged_before`: the caller knows otherwise that this thread was paged (view mode, whose
    state keeps no bookmark).

    Raises:
        ValueError: `MISSING_STATE`, naming the state schema to use.
    """
    if STATE_KEY in state:
        value: PagingValue = state[STATE_KEY]  # the channel's dict, unparsed
        return value
    if paged_before or any(is_bookmark(m) for m in state.get(messages_key) or ()):
        raise ValueError(MISSING_STATE)
    return None


@dataclass(frozen=True)
class GraphCall:
    """One step's run context: what it read from the graph state, from which its update is built."""

    messages: Sequence[BaseMessage]
    """The state's messages (replace mode: bookmarks in place of pages; view mode: the whole history)."""
    state: PagingValue
    """The ``paging`` value of the branch (None before any step)."""
    mode: Mode
    """`replace` or `view` (see `PagingConfig.mode`)."""
    view: list[BaseMessage]
    """The messages the step pages: `messages` (replace) or the view the last step left (view)."""
    positions: dict[int, int]
    """View mode: where each view message sits in `messages`, which the update needs to rebuild the
    skeleton (kept as `prepare_view` made it: the update reads it, nothing writes it)."""
    thread_id: str = ""
    """The graph's thread ("" for a step without a store)."""

    @classmethod
    def prepare(
        cls, messages: Sequence[BaseMessage], state: PagingValue, mode: Mode, thread_id: str = ""
    ) -> GraphCall:
        """The call over `messages` and the ``paging`` value `state`."""
        view, positions = prepare_view(messages, state, mode)
        return cls(messages, state, mode, view, positions, thread_id)

    def step_input(self) -> dict[str, Any]:
        """What `Pager.step` pages: this call's view on its branch's state, for its thread."""
        return {"view": self.view, "state": self.state, "thread_id": self.thread_id}

    def update(self, result: PagingResult) -> dict[str, Any]:
        """The graph update after `result`: the new paging state (if it changed) and, in replace
        mode, the message updates."""
        return state_update(result, self.messages, self.state, self.mode, self.positions)
