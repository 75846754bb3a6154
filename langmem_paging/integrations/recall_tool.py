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
from pydantic.json_schema import SkipJsonSchema

from langmem_paging.core.messages import METADATA_KEY
from langmem_paging.core.state import STATE_KEY, PagingState, recall_delta
from langmem_paging.core.tracing import arecall_run, recall_run
from langmem_paging.integrations.graph_state import MISSING_STATE, GraphCall, find_thread_id, paging_value
from langmem_paging.recall.plan import plan_recall
from langmem_paging.recall.request import RecallAnswer, RecallArgs, Served
from langmem_paging.runtime.pager import Pager
from langmem_paging.step.result import PagingValue

__all__ = ["RECALL_DESCRIPTION", "SCHEMA_HELP", "make_recall_tool"]

RECALL_DESCRIPTION = (
    "Bring back exact paged-out text of this chat. page_ids: bookmark ids, [p3:...] for page p3 "
    "(returned whole), [c2:...|p1-p9] for cluster c2 (lists its pages). query: words to find "
    "excerpts in all paged-out text, when no bookmark fits."
)
"""Sent with every call, so every token counts: the whole schema is 116 tokens as OpenAI bills it
(`TokenCounter.count_tools`, cl100k_base; 240 as a JSON dump counted it before). What the model
needs and nothing its results tell it: an id's letter says what comes back (a page whole, a
cluster's page list) and a search returns excerpts headed by the page id alone (recall spec
version 3), so an excerpt is told from a whole page; a long page's result names the
``part=`` call that reads on, and a ``None`` argument is accepted but not advertised (the
schema's types leave ``null`` out)."""

SCHEMA_HELP = MISSING_STATE
"""The error for a graph state without the ``paging`` key (one text: `graph_step.MISSING_STATE`)."""

_NO_THREAD = "{tool} is unavailable: this run has no thread_id, so there is no paged-out history."


def _messages(runtime: ToolRuntime) -> list[BaseMessage]:
    """The graph state's messages."""
    messages: list[BaseMessage] = runtime.state.get("messages", []) if isinstance(runtime.state, dict) else []
    return messages


def _call(runtime: ToolRuntime) -> Any:
    """The model's message that made this call (its tool calls' results arrive together)."""
    for message in reversed(_messages(runtime)):
        if getattr(message, "tool_calls", None):
            return message
    return None


def _shares(message: Any, call_id: str | None, name: str) -> tuple[int, int, dict[str, str]]:
    """How the room is shared among the calls of one message: ``(this call's shares, all
    shares, the ids other recall calls serve by call id)``. A share is a distinct page or
    cluster (served by the first recall call asking for it), a search, or a call of another
    tool; a repeated id costs nothing, so six calls for p1, p2, p1, p2, p1, p2 split the room
    in two, not six."""
    owners: dict[str, str] = {}
    shares: dict[str, int] = {}
    for k, call in enumerate(getattr(message, "tool_calls", None) or []):
        cid = str(call.get("id") or f"#{k}")
        if call.get("name") != name:
            shares[cid] = 1
            continue
        args = call.get("args") or {}
        plan = plan_recall(args.get("page_ids"), args.get("query"))
        new = [ident for ident in [*plan.page_ids, *plan.cluster_ids] if ident not in owners]
        owners.update(dict.fromkeys(new, cid))
        shares[cid] = len(new) + (plan.query is not None)
    mine = str(call_id) if call_id is not None else None
    others = {ident: owner for ident, owner in owners.items() if owner != mine}
    return shares.get(mine or "", 1 if message is None else 0), max(1, sum(shares.values())), others


def _sizing(pager: Pager, runtime: ToolRuntime, name: str, state: PagingValue, query: Any) -> RecallArgs:
    """How the result is sized and where it reads: its part of the room (shared among the distinct
    pages the message's calls ask for), the calling message's tokens, the ids a sibling recall
    serves (pointed to only when that sibling's part holds them), and the store of this call
    (the graph's, unless the pager has its own)."""
    message = _call(runtime)
    call_tokens = pager.counter_for(state=state).count_message(message) if message is not None else 0
    history = _messages(runtime)
    mine, total, others = _shares(message, runtime.tool_call_id, name)
    branch = PagingState.from_value(state)
    served = {}
    for ident, owner in others.items():
        owner_shares = max(1, _shares(message, owner, name)[0])
        owner_room = pager.room_for(branch, share=_share_of(owner_shares, total), call_tokens=call_tokens)
        served[ident] = Served(owner, owner_room // owner_shares)
    return {
        "share": _share_of(mine, total),
        "call_tokens": call_tokens,
        "store": runtime.store,
        "history": history,
        "served": served,
        "context": _context(pager, history, state) if query is not None else [],
    }


def _share_of(mine: int, total: int) -> int:
    """The divisor of the room for a call holding `mine` of `total` shares (rounded so the calls
    never take more than the room together); a call with nothing of its own to show gets a
    share's worth, for its notes."""
    return -(-total // mine) if mine else total


def _context(pager: Pager, history: list[BaseMessage], state: PagingValue) -> list[BaseMessage]:
    """What the model sees (a search ranks its turns): the state's messages (replace mode) or the view
    rendered from them."""
    if pager.config.mode == "view":
        return GraphCall.prepare(history, state, "view").view
    return history


def _run_data(args: RecallArgs, answer: RecallAnswer) -> dict[str, Any]:
    """What a recall's traced run records: what was asked, the page ids its result shows (its
    artifact's record) and its status."""
    served = list((answer.artifact.get(METADATA_KEY) or {}).get("recalled") or [])
    asked = {key: args.get(key) for key in ("query", "page_ids", "part")}
    return {**asked, "served": served, "status": answer.status}


def _command(answer: RecallAnswer, runtime: ToolRuntime, name: str) -> Command[Any]:
    message_id = f"recall-{uuid.uuid4().hex}"
    message = ToolMessage(
        answer.content,
        tool_call_id=runtime.tool_call_id or "",
        name=name,
        id=message_id,
        artifact=answer.artifact,
        status=answer.status,
    )
    update: dict[str, Any] = {"messages": [message]}
    update[STATE_KEY] = recall_delta(answer.accessed, turn=answer.turn, results=[message_id, *answer.kept])
    return Command(update=update)


def make_recall_tool(pager: Pager, *, name: str = "recall") -> BaseTool:
    """A tool (sync and async) reading only the calling thread's pages on the running branch.

    Bad arguments and unknown ids come back as a tool message; the tool never raises for
    what the model sends. A page store failure (after its retries) comes back as an error
    tool message asking the model to try again, so the call always gets its result.
    """

    def asked(
        runtime: ToolRuntime, page_ids: Any = None, query: Any = None, part: Any = None
    ) -> tuple[str, PagingValue, RecallArgs] | None:
        """The thread, its paging state and the recall asked (None: the run has no thread)."""
        if (thread_id := find_thread_id(runtime.config or {})) is None:
            return None
        state = paging_value(runtime.state if isinstance(runtime.state, dict) else {})
        sizing = _sizing(pager, runtime, name, state, query)
        return thread_id, state, {**sizing, "page_ids": page_ids, "query": query, "part": part}

    def recall(
        page_ids: list[str] | str | SkipJsonSchema[None] = None,
        query: str | SkipJsonSchema[None] = None,
        part: int | SkipJsonSchema[None] = None,
        *,
        runtime: ToolRuntime,
    ) -> Command[Any] | str:
        if (call := asked(runtime, page_ids, query, part)) is None:
            return _NO_THREAD.format(tool=name)
        answer = pager.recall(call[0], call[1], **call[2])
        recall_run(**_run_data(call[2], answer))
        return _command(answer, runtime, name)

    async def arecall(*, runtime: ToolRuntime, **arguments: Any) -> Command[Any] | str:
        """`recall`, awaited: the tool's schema is `recall`'s (`StructuredTool` reads its `func`), so the
        arguments come as it parsed them."""
        if (call := asked(runtime, **arguments)) is None:
            return _NO_THREAD.format(tool=name)
        answer = await pager.arecall(call[0], call[1], **call[2])
        await arecall_run(**_run_data(call[2], answer))
        return _command(answer, runtime, name)

    return StructuredTool.from_function(
        func=recall, coroutine=arecall, name=name, description=RECALL_DESCRIPTION
    )
