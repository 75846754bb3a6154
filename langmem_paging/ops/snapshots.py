"""A thread's checkpoints as the operator tools read them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, messages_from_dict
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from langmem_paging.core.state import STATE_KEY, PagingState

__all__ = [
    "Branches",
    "PagingStep",
    "Snapshot",
    "latest_branch",
    "load_branches",
    "load_snapshots",
    "paging_steps",
    "snapshot_of_state",
]


@dataclass
class Snapshot:
    """One checkpoint of a thread, as the operator tools read it."""

    checkpoint_id: str
    """The checkpoint's id."""
    parent_id: str | None
    """Id of the checkpoint it follows (None for the first)."""
    step: int | None
    """LangGraph's step number (``-1`` for a run's input)."""
    created_at: str | None
    """When it was written (ISO 8601)."""
    messages: list[BaseMessage]
    """The state's ``messages`` at that point."""
    paging: dict[str, Any] | None
    """The state's ``paging`` value (None before the first paging step)."""


def _snapshot(tup: CheckpointTuple) -> Snapshot:
    values = tup.checkpoint.get("channel_values") or {}
    parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    messages = values.get("messages") or []
    return Snapshot(
        checkpoint_id=tup.config["configurable"]["checkpoint_id"],
        parent_id=parent,
        step=(tup.metadata or {}).get("step"),
        created_at=tup.checkpoint.get("ts"),
        messages=[m for m in messages if isinstance(m, BaseMessage)],
        paging=values.get(STATE_KEY) or None,
    )


def snapshot_of_state(state: Mapping[str, Any]) -> Snapshot:
    """One checkpoint from a LangGraph server's thread state (``client.threads.get_history``: its
    messages serialized as dicts with their ``type``)."""
    values = state.get("values")
    values = values if isinstance(values, dict) else {}  # a graph whose state is not a dict
    messages = values.get("messages") or []
    return Snapshot(
        checkpoint_id=state["checkpoint"]["checkpoint_id"],
        parent_id=(state.get("parent_checkpoint") or {}).get("checkpoint_id"),
        step=(state.get("metadata") or {}).get("step"),
        created_at=state.get("created_at"),
        messages=messages_from_dict(
            [{"type": m["type"], "data": m} for m in messages if isinstance(m, dict)]
        ),
        paging=values.get(STATE_KEY) or None,
    )


def load_snapshots(
    saver: BaseCheckpointSaver[Any], thread_id: str, *, lineage: bool = True
) -> list[Snapshot]:
    """The thread's checkpoints (root graph) on the branch of its latest one, oldest first.

    Args:
        saver: The graph's checkpointer.
        thread_id: The thread.
        lineage: False loads only the latest checkpoint.

    Returns:
        Oldest first; empty if the thread has no checkpoint. Checkpoints of other branches
        (forks, time travel, a concurrent run's lost writes) are left out: the latest one's
        parents are followed (`load_branches` returns them too).
    """
    if not lineage:
        latest = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
        return [_snapshot(latest)] if latest is not None else []
    return load_branches(saver, thread_id).latest


@dataclass
class Branches:
    """A thread's checkpoints (root graph), split at its latest one's branch."""

    latest: list[Snapshot]
    """The latest checkpoint's branch, oldest first (`load_snapshots`)."""
    others: list[Snapshot]
    """Every other checkpoint, oldest first: forks, time travel, and what a run writing on the
    thread at the same time as another wrote and lost (LangGraph's last write wins)."""


def load_branches(saver: BaseCheckpointSaver[Any], thread_id: str) -> Branches:
    """The thread's checkpoints in one listing: the latest one's branch and all the others."""
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    return _branches(map(_snapshot, saver.list(config)))


def latest_branch(snapshots: Iterable[Snapshot]) -> list[Snapshot]:
    """The checkpoints on the branch of the latest one (its parents followed), oldest first; checkpoints
    of other branches (forks, time travel) are left out. The checkpoints may come in any order (a
    checkpointer's ``list``, a LangGraph server's thread history)."""
    return _branches(snapshots).latest


def _branches(snapshots: Iterable[Snapshot]) -> Branches:
    by_id = {s.checkpoint_id: s for s in snapshots}
    chain: list[Snapshot] = []
    at: str | None = max(by_id, default=None)  # checkpoint ids are time-ordered (uuid6), as get_tuple assumes
    while at is not None and at in by_id:
        chain.append(by_id.pop(at))
        at = chain[-1].parent_id
    return Branches(latest=chain[::-1], others=[by_id[key] for key in sorted(by_id)])


@dataclass
class PagingStep:
    """One model call as the checkpoints record it: the paging step before it."""

    step: int
    """1 for the thread's first model call found, 2 for the next, ..."""
    turn: int
    """User turns paging had seen (the paging state's ``turn``)."""
    tokens: int
    """Tokens of the messages the model received: the view the paging step produced (system
    prompt and tool schemas not included)."""
    budget: int
    """The message budget of that step (``max_tokens`` minus system prompt and tool schemas)."""
    checkpoint_id: str
    """The checkpoint written after the model call."""


def paging_steps(snapshots: list[Snapshot]) -> list[PagingStep]:
    """The model calls of a thread, from its checkpoints: a checkpoint whose newest message is a
    model answer the previous checkpoint did not end with follows one model call, and its paging
    state holds what that call's paging step produced (``tokens``, ``budget``). (A run's input
    checkpoint still ends with the previous answer: it is no model call.)

    Checkpoints a run did not write (``durability="exit"``) leave their model calls out.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> def snap(i, last, tokens):
        ...     paging = PagingState(turn=1, tokens=tokens, budget=500).to_value()
        ...     return Snapshot(str(i), None, i, None, [last], paging)
        >>> answer = AIMessage("yo", id="a1")
        >>> snaps = [snap(0, HumanMessage("hi", id="h1"), 0), snap(1, answer, 42), snap(2, answer, 42)]
        >>> [(s.step, s.tokens) for s in paging_steps(snaps)]  # the third is the next run's input
        [(1, 42)]
    """
    steps: list[PagingStep] = []
    before: BaseMessage | None = None
    for snapshot in snapshots:
        paging = PagingState.from_value(snapshot.paging or None)
        last = snapshot.messages[-1] if snapshot.messages else None
        new = last is not None and (before is None or last.id != before.id or last.id is None)
        before = last
        if new and isinstance(last, AIMessage) and paging.tokens:  # a step wrote it
            steps.append(
                PagingStep(
                    step=len(steps) + 1,
                    turn=paging.turn,
                    tokens=paging.tokens,
                    budget=paging.budget,
                    checkpoint_id=snapshot.checkpoint_id,
                )
            )
    return steps
