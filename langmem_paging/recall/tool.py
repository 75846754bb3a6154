"""The `recall` tool the model calls to bring evicted pages back.

It reads only the calling thread's pages visible on the running branch (the paging
state in the graph's checkpoint decides), and answers with a `Command`: the tool
message, plus a small update counting one access per page returned. Parallel recalls
in one model turn each add their counts (`paging_reducer`), so none is lost.
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt.tool_node import ToolRuntime
from langgraph.types import Command

from langmem_paging.graph_step import MISSING_STATE, GraphCall, find_thread_id, paging_value
from langmem_paging.pager import Pager
from langmem_paging.recall.plan import plan_recall
from langmem_paging.recall.service import RecallAnswer
from langmem_paging.state import STATE_KEY, recall_delta

__all__ = ["RECALL_DESCRIPTION", "SCHEMA_HELP", "make_recall_tool"]

RECALL_DESCRIPTION = (
    "Bring back the exact text of earlier parts of this conversation, which were paged out. "
    "A bookmark [p3:Caroline,adoption] stands for page p3 (keywords after the colon); "
    "[c2:...|p1-p9] for a cluster of pages. page_ids=['p3'] returns pages whole (a long one "
    "in parts: part=2, ...); page_ids=['c2'] lists a cluster's pages so you can pick. "
    "query='words' searches everything paged out: use it when no bookmark clearly fits."
)

SCHEMA_HELP = MISSING_STATE
"""The error for a graph state without the ``paging`` key (one text: `graph_step.MISSING_STATE`)."""

_NO_THREAD = "recall is unavailable: this run has no thread_id, so there is no paged-out history."


def _thread_id(runtime: ToolRuntime) -> str | None:
    return find_thread_id(runtime.config or {})


def _paging_state(runtime: ToolRuntime) -> Any:
    return paging_value(runtime.state if isinstance(runtime.state, dict) else {})


def _call(runtime: ToolRuntime, name: str) -> tuple[Any, int]:
    """The model's message that made this call, and how many tool calls it made at once: their
    results arrive together, so a recall gets its share of the room (the next step pages a sibling
    result over its share on arrival)."""
    messages = (runtime.state or {}).get("messages", []) if isinstance(runtime.state, dict) else []
    for message in reversed(messages):
        calls = getattr(message, "tool_calls", None)
        if calls:
            return message, max(1, len(calls))
    return None, 1


def _served(message: Any, call_id: str | None, name: str) -> dict[str, str]:
    """Pages and clusters that recall calls before this one in the same message ask for, by call
    id: parallel recalls serve each page once."""
    served: dict[str, str] = {}
    for call in getattr(message, "tool_calls", None) or []:
        if call.get("id") == call_id:
            break
        if call.get("name") == name:
            args = call.get("args") or {}
            plan = plan_recall(args.get("page_ids"), None)
            for ident in [*plan.page_ids, *plan.cluster_ids]:
                served.setdefault(ident, str(call.get("id")))
    return served


def _sizing(pager: Pager, runtime: ToolRuntime, name: str, state: Any, query: Any) -> dict[str, Any]:
    """How the result is sized and where it reads: its share of the room, the calling message's
    tokens, what sibling recalls serve, and the store of this call (the graph's, unless the pager
    has its own)."""
    message, share = _call(runtime, name)
    call_tokens = pager.counter_for(state=state).count_message(message) if message is not None else 0
    history = (runtime.state or {}).get("messages", []) if isinstance(runtime.state, dict) else []
    return {"share": share, "call_tokens": call_tokens, "store": runtime.store, "history": history,
            "served": _served(message, runtime.tool_call_id, name), "context": _context(pager, history, state) if query is not None else []}


def _context(pager: Pager, history: list[BaseMessage], state: Any) -> list[BaseMessage]:
    """What the model sees (a search ranks its turns): the state's messages (replace mode) or the view
    rendered from them."""
    if pager.config.mode == "view":
        return GraphCall.prepare(history, state, "view").view
    return history


def _command(answer: RecallAnswer, runtime: ToolRuntime, name: str) -> Command[Any]:
    message_id = f"recall-{uuid.uuid4().hex}"
    message = ToolMessage(answer.content, tool_call_id=runtime.tool_call_id or "", name=name, id=message_id,
                          artifact=answer.artifact, status=answer.status)
    update: dict[str, Any] = {"messages": [message]}
    update[STATE_KEY] = recall_delta(answer.accessed, turn=answer.turn, results=[message_id, *answer.kept])
    return Command(update=update)


def make_recall_tool(pager: Pager, *, name: str = "recall") -> BaseTool:
    """A tool (sync and async) reading only the calling thread's pages on the running branch.

    Bad arguments and unknown ids come back as a tool message; the tool never raises for
    what the model sends. A page store failure (after its retries) comes back as an error
    tool message asking the model to try again, so the call always gets its result.
    """

    def recall(
        page_ids: list[str] | str | None = None,
        query: str | None = None,
        part: int | None = None,
        *,
        runtime: ToolRuntime,
    ) -> Command[Any] | str:
        thread_id = _thread_id(runtime)
        if thread_id is None:
            return _NO_THREAD
        state = _paging_state(runtime)
        answer = pager.recall(thread_id, state, page_ids=page_ids, query=query, part=part,
                              **_sizing(pager, runtime, name, state, query))
        return _command(answer, runtime, name)

    async def arecall(
        page_ids: list[str] | str | None = None,
        query: str | None = None,
        part: int | None = None,
        *,
        runtime: ToolRuntime,
    ) -> Command[Any] | str:
        thread_id = _thread_id(runtime)
        if thread_id is None:
            return _NO_THREAD
        state = _paging_state(runtime)
        answer = await pager.arecall(thread_id, state, page_ids=page_ids, query=query, part=part,
                                     **_sizing(pager, runtime, name, state, query))
        return _command(answer, runtime, name)

    return StructuredTool.from_function(func=recall, coroutine=arecall, name=name, description=RECALL_DESCRIPTION)
