"""A thread's checkpoints as the operator tools read them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

from langmem_paging.state import STATE_KEY

__all__ = ["Snapshot", "load_snapshots"]


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


def _snapshot(tup) -> Snapshot:
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


def load_snapshots(saver: BaseCheckpointSaver, thread_id: str, *, lineage: bool = True) -> list[Snapshot]:
    """The thread's checkpoints (root graph) on the branch of its latest one, oldest first.

    Args:
        saver: The graph's checkpointer.
        thread_id: The thread.
        lineage: False loads only the latest checkpoint.

    Returns:
        Oldest first; empty if the thread has no checkpoint. Checkpoints of other branches
        (forks, time travel) are left out: the latest one's parents are followed.
    """
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    if not lineage:
        latest = saver.get_tuple(config)
        return [_snapshot(latest)] if latest is not None else []
    by_id = {s.checkpoint_id: s for s in map(_snapshot, saver.list(config))}
    if not by_id:
        return []
    latest = max(by_id)  # checkpoint ids are time-ordered (uuid6), as `get_tuple` assumes
    chain, at = [], latest
    while at is not None and at in by_id:
        chain.append(by_id[at])
        at = by_id[at].parent_id
    return chain[::-1]
