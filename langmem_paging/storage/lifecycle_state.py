"""Making the state the next prompt is built from agree with a forget (the next prompt's source).

Two paths, one rule (`forget_in_state`, fed from the records as they now are, never from what one
run removed, so a re-run after a crash converges):

- **The next step** (`langmem_paging.runtime.lifecycle_step.follow_lifecycle`, every step, no graph needed): the step reads the thread's
  lifecycle record (one read); when its generation is not the one the branch's state was built at,
  a forget happened since, and the step corrects what the state shows (bookmarks, cluster bookmarks,
  warm digests, the sketch of an old checkpoint, recall results that carried a forgotten page, the
  forgotten messages themselves) from the records of the pages holding the forgotten messages and
  of the cluster roots shown, before it pages. Its cost follows what it shows, never the history.
- **At forget time** (optional): with the compiled graph, through ``graph.update_state``; with only
  a checkpointer (the command line), as one new checkpoint on top of the latest, with the changed
  channels' versions advanced as ``update_state`` writes them. Old checkpoints (time travel) stay the
  checkpointer's; a branch resumed from one is corrected by its next step like any other.

This module is the second; sync and async drive one flow (`_write`), differing only at the I/O calls.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from datetime import UTC, datetime
from typing import Any

from langmem_paging.core.effects import adrive, drive
from langmem_paging.storage.lifecycle import Forgotten, forget_in_state, merged_messages

__all__ = ["awrite_forgotten", "write_forgotten"]


_Call = tuple[Callable[[], Any], Callable[[], Awaitable[Any]]]
"""One I/O call of `_write`, sync and async (an object may have only the side its caller uses)."""


def write_forgotten(
    forgot: Forgotten,
    thread_id: str,
    *,
    graph: Any = None,
    config: dict[str, Any] | None = None,
    checkpointer: Any = None,
) -> bool:
    """Make the thread's latest state agree with `forgot`; True if a state was written."""
    return drive(_write(forgot, thread_id, graph, config, checkpointer), lambda call: call[0]())


async def awrite_forgotten(
    forgot: Forgotten,
    thread_id: str,
    *,
    graph: Any = None,
    config: dict[str, Any] | None = None,
    checkpointer: Any = None,
) -> bool:
    """Async `write_forgotten`."""
    return await adrive(_write(forgot, thread_id, graph, config, checkpointer), lambda call: call[1]())


def _write(
    forgot: Forgotten, thread_id: str, graph: Any, config: dict[str, Any] | None, checkpointer: Any
) -> Generator[_Call, Any, bool]:
    if graph is not None:
        config = config if config is not None else {"configurable": {"thread_id": thread_id}}
        snapshot = yield (lambda: graph.get_state(config)), (lambda: graph.aget_state(config))
        update = forget_in_state(snapshot.values or {}, forgot)
        if update:
            yield (lambda: graph.update_state(config, update)), (lambda: graph.aupdate_state(config, update))
        return bool(update)
    if checkpointer is not None:
        saver = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        latest = yield (lambda: checkpointer.get_tuple(saver)), (lambda: checkpointer.aget_tuple(saver))
        planned = _checkpoint(checkpointer, latest, forgot)
        if planned is not None:
            yield (
                (lambda: checkpointer.put(latest.config, *planned)),
                (lambda: checkpointer.aput(latest.config, *planned)),
            )
        return planned is not None
    return False


def _checkpoint(
    saver: Any, latest: Any, forgot: Forgotten
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]] | None:
    """The checkpoint, metadata and new channel versions that put the update on top of `latest`
    (None: no checkpoint, or nothing to change)."""
    from langgraph.checkpoint.base import copy_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    if latest is None:
        return None
    values = latest.checkpoint.get("channel_values", {})
    update = forget_in_state(values, forgot)
    if not update:
        return None
    step = (latest.metadata or {}).get("step", -1) + 1
    checkpoint: Any = copy_checkpoint(latest.checkpoint)
    versions: dict[str, Any] = {}
    for channel, new in update.items():
        checkpoint["channel_values"][channel] = (
            merged_messages(values.get("messages") or [], new) if channel == "messages" else new
        )
        versions[channel] = saver.get_next_version(checkpoint["channel_versions"].get(channel), None)
    checkpoint["channel_versions"].update(versions)
    checkpoint["id"] = str(uuid6(clock_seq=step))
    checkpoint["ts"] = datetime.now(UTC).isoformat()
    if "updated_channels" in checkpoint:
        checkpoint["updated_channels"] = sorted(versions)
    metadata = {"source": "update", "step": step, "parents": {}}
    return checkpoint, metadata, versions
