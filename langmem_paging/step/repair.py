"""Before paging: a tool call left without its result while the conversation went on is answered.

A run can stop between the model's tool call and the tools' results (a crash between the tool
node's pending writes and the next checkpoint, a cancelled run); when the app then sends a new
message, the thread holds an AI message whose calls were never answered, followed by other
messages: an invalid chat every provider refuses, in every later prompt (paging keeps unanswered
calls). The step answers each such call as `create_agent` answers a malformed one: an error
ToolMessage right after the call, so the thread recovers. A call with nothing after it but its
results is left alone as in flight, unless the step runs right before a model call (the `Pager`'s:
a run killed in its tools whose input was sent again, replaced in place before the call).

Example:
    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> call = AIMessage("", id="a1", tool_calls=[{"name": "lookup", "args": {}, "id": "c1"}])
    >>> [m.type for m in repair_unanswered([call, HumanMessage("hello?", id="h2")])]
    ['ai', 'tool', 'human']
    >>> repair_unanswered([call]) is None
    True
    >>> [m.type for m in repair_unanswered([call], in_flight=False)]
    ['ai', 'tool']
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langmem_paging.core.messages import METADATA_KEY, displaced_id, library_mark, tool_call_ids

__all__ = ["repair_unanswered"]

REPAIR_TEXT = (
    "Error: this tool call got no result (the run stopped before the tool answered). "
    "Call the tool again if you still need it."
)


def repair_unanswered(messages: Sequence[BaseMessage], *, in_flight: bool = True) -> list[BaseMessage] | None:
    """`messages` with an error result after each call nothing answered before the conversation went
    on (or at all: no call `in_flight`), and without the error results of ours whose call is no
    longer before them (a new message took the id of the call's message), or None when there is
    nothing to change."""
    out: list[BaseMessage] = []
    repaired = False
    calls: set[str] = set()  # the calls of the message the current run of tool results follows
    for i, message in enumerate(messages):
        if not isinstance(message, ToolMessage):
            calls = set(tool_call_ids(message))
        elif library_mark(message).get("repair") and message.tool_call_id not in calls:
            repaired = True  # an error result of ours whose call a new message displaced (reused id)
            continue
        out.append(message)
        if not calls or not isinstance(message, AIMessage):  # (no call of its own: nothing to answer)
            continue
        missing = _unanswered(messages, i)
        if missing and (not in_flight or any(not isinstance(m, ToolMessage) for m in messages[i + 1 :])):
            taken = {m.id for m in messages}  # once per repair, which is rare
            out += [_error_result(message, call_id, taken) for call_id in missing]
            repaired = True
    return out if repaired else None


def _unanswered(messages: Sequence[BaseMessage], at: int) -> list[str]:
    """The calls of ``messages[at]`` with no result among the tool messages right after it."""
    pending = list(tool_call_ids(messages[at]))
    for message in messages[at + 1 :]:
        if not isinstance(message, ToolMessage):
            break
        if message.tool_call_id in pending:
            pending.remove(message.tool_call_id)
    return pending


def _error_result(call: AIMessage, call_id: str, taken: set[str | None]) -> ToolMessage:
    """The error result of `call_id`, under an id no message has (an app message may have taken the
    id an earlier repair had: then it displaced that result, and this one answers the call again)."""
    ident = f"repair-{call_id}"
    while ident in taken:
        ident = displaced_id(ident, "repair")
    taken.add(ident)
    name = next(
        (c.get("name") for c in [*call.tool_calls, *call.invalid_tool_calls] if c.get("id") == call_id), None
    )
    return ToolMessage(
        REPAIR_TEXT,
        tool_call_id=call_id,
        name=name,
        id=ident,
        status="error",
        additional_kwargs={METADATA_KEY: {"repair": call_id}},
    )
