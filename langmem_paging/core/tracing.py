"""Paging as runs of its own in LangSmith (and any LangChain tracer).

A step that changed something is recorded as a ``paging`` chain run beside the model's run, under
the same parent (the model node's run with `create_agent`, the node's run with `PagingNode`): its
inputs are what the step started from, its outputs what it did, with page ids; the same as flat
``paging_*`` metadata, which LangSmith filters on. A recall adds a ``recall_pages`` run under the
tool's run, with the query and the page ids it served.

The runs are recorded after the work, from what it reported (tracers see their start and end
together): a quiet step, or a call outside any traced run, sets nothing up. `paging_run` and
`apaging_run` are what the step engine's tracing calls (`thread_io.ThreadIO.trace`), `recall_run`
and `arecall_run` the recall tool.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.callbacks import AsyncCallbackManager, CallbackManager
from langchain_core.runnables.config import (
    RunnableConfig,
    get_async_callback_manager_for_config,
    get_callback_manager_for_config,
    var_child_runnable_config,
)

__all__ = ["PAGING_RUN", "RECALL_RUN", "apaging_run", "arecall_run", "paging_run", "recall_run"]

PAGING_RUN = "paging"
"""The name of a paging step's run."""

RECALL_RUN = "recall_pages"
"""The name of the run a recall adds under its tool's run."""

_TAGS = ["langmem-paging"]

M = TypeVar("M", CallbackManager, AsyncCallbackManager)


def _news(data: Mapping[str, Any]) -> bool:
    """True when the step formed, evicted or folded pages, changed the tokens, or is over budget."""
    return bool(
        data.get("formed")
        or data.get("evicted")
        or data.get("folded")
        or data.get("over_budget")
        or data.get("tokens_before") != data.get("tokens")
    )


def _step_parts(data: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Inputs, outputs and metadata of a step's run."""
    inputs = {
        "thread_id": data.get("thread_id"),
        "tokens_before": data.get("tokens_before"),
        "budget": data.get("budget"),
    }
    outputs = {
        "tokens": data.get("tokens"),
        "formed": list(data.get("formed") or []),
        "evicted": list(data.get("evicted") or []),
        "folded": list(data.get("folded") or []),
        "over_budget": bool(data.get("over_budget")),
    }
    metadata = {
        "paging_tokens_before": inputs["tokens_before"],
        "paging_tokens": outputs["tokens"],
        "paging_message_budget": inputs["budget"],
        "paging_formed_ids": outputs["formed"],
        "paging_evicted_ids": outputs["evicted"],
        "paging_folded_ids": outputs["folded"],
        "paging_over_budget": outputs["over_budget"],
    }
    return inputs, outputs, metadata


def _recall_parts(
    query: Any, page_ids: Any, part: Any, served: Sequence[str], status: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Inputs, outputs and metadata of a recall's run."""
    inputs = {"query": query, "page_ids": page_ids, "part": part}
    outputs = {"served": list(served), "status": status}
    metadata = {"paging_recall_query": query, "paging_recall_served": list(served)}
    return inputs, outputs, metadata


def _manager(metadata: dict[str, Any], build: Callable[[RunnableConfig], M]) -> M | None:
    """`build`'s callback manager for the traced run around this call, or None outside one."""
    config = var_child_runnable_config.get()
    if not config or not config.get("callbacks"):
        return None  # not inside a traced run: nothing to attach a run to
    manager = build(config)
    if not manager.handlers:
        return None
    manager.add_metadata(metadata, inherit=False)
    manager.add_tags(_TAGS, inherit=False)
    return manager


def _record(name: str, inputs: dict[str, Any], outputs: dict[str, Any], metadata: dict[str, Any]) -> None:
    manager = _manager(metadata, get_callback_manager_for_config)
    if manager is not None:
        manager.on_chain_start(None, inputs, name=name).on_chain_end(outputs)


async def _arecord(
    name: str, inputs: dict[str, Any], outputs: dict[str, Any], metadata: dict[str, Any]
) -> None:
    manager = _manager(metadata, get_async_callback_manager_for_config)
    if manager is not None:
        run = await manager.on_chain_start(None, inputs, name=name)
        await run.on_chain_end(outputs)


def paging_run(data: Mapping[str, Any]) -> None:
    """Record a step that changed something (`StepEngine`'s trace data) as a ``paging`` run."""
    if _news(data):
        _record(PAGING_RUN, *_step_parts(data))


async def apaging_run(data: Mapping[str, Any]) -> None:
    """Async `paging_run`."""
    if _news(data):
        await _arecord(PAGING_RUN, *_step_parts(data))


def recall_run(*, query: Any, page_ids: Any, part: Any, served: Sequence[str], status: str) -> None:
    """Record a recall under its tool's run: the query, the ids asked for and the page ids served."""
    _record(RECALL_RUN, *_recall_parts(query, page_ids, part, served, status))


async def arecall_run(*, query: Any, page_ids: Any, part: Any, served: Sequence[str], status: str) -> None:
    """Async `recall_run`."""
    await _arecord(RECALL_RUN, *_recall_parts(query, page_ids, part, served, status))
