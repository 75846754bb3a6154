"""Pure helpers over LangChain messages: metadata, atomic units, serialization.

A *unit* is the smallest run of messages that may be paged on its own: an AI
message with tool calls together with every ToolMessage that answers it (parallel
calls included), or any other single message. Pages are whole units, so a
ToolMessage never loses the AI message it answers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langmem_paging.core.tokens import message_text

__all__ = [
    "METADATA_KEY",
    "Unit",
    "displaced_id",
    "dump_messages",
    "is_bookmark",
    "library_mark",
    "is_pinned",
    "is_user_turn",
    "load_messages",
    "merge_messages",
    "message_keys",
    "message_session",
    "message_timestamp",
    "recall_copy_pages",
    "recall_copy_shown",
    "require_messages",
    "rewrites_all",
    "speaker",
    "split_units",
    "tool_call_ids",
]

METADATA_KEY = "langmem_paging"
"""Key in `additional_kwargs` under which the library marks its own messages."""


def _meta(message: BaseMessage) -> dict[str, Any]:
    value = message.additional_kwargs.get(METADATA_KEY)
    return value if isinstance(value, dict) else {}


def rewrites_all(updates: Sequence[BaseMessage]) -> bool:
    """Whether `add_messages` updates replace the whole list (``REMOVE_ALL_MESSAGES`` first)."""
    return bool(updates) and isinstance(updates[0], RemoveMessage) and updates[0].id == REMOVE_ALL_MESSAGES


def library_mark(message: BaseMessage) -> dict[str, Any]:
    """The library's metadata on a message (``{}`` for others): ``bookmark``, ``cluster``,
    ``paged_result``, ``shrunk``. Only the paging state decides whether it is really ours."""
    return _meta(message)


def is_bookmark(message: BaseMessage) -> bool:
    """True for page and cluster bookmarks the library emitted (metadata), never for look-alike text."""
    meta = _meta(message)
    return isinstance(message, HumanMessage) and (
        isinstance(meta.get("bookmark"), str) or isinstance(meta.get("cluster"), str)
    )


def is_pinned(message: BaseMessage) -> bool:
    """System messages and messages marked ``additional_kwargs={"langmem_paging": {"pinned": True}}``."""
    return isinstance(message, SystemMessage) or bool(_meta(message).get("pinned"))


def is_user_turn(message: BaseMessage) -> bool:
    """A message the user wrote (bookmarks are human messages but not user turns)."""
    return isinstance(message, HumanMessage) and not is_bookmark(message)


def recall_copy_pages(message: BaseMessage) -> list[str]:
    """Page ids whose text a `recall` ToolMessage carries, or [] for any other message."""
    if not isinstance(message, ToolMessage) or not isinstance(message.artifact, dict):
        return []
    recalled = message.artifact.get(METADATA_KEY, {})
    pages = recalled.get("recalled") if isinstance(recalled, dict) else None
    return list(pages) if isinstance(pages, list) else []


def recall_copy_shown(message: BaseMessage) -> list[str]:
    """Page ids a `recall` ToolMessage shows anything of: the pages whose text it carries and the
    member pages a cluster listing names with their bookmarks (the spec's cluster items)."""
    if not isinstance(message, ToolMessage) or not isinstance(message.artifact, dict):
        return []
    recalled = message.artifact.get(METADATA_KEY, {})
    spec = recalled.get("spec") if isinstance(recalled, dict) else None
    items = spec.get("items") if isinstance(spec, dict) else None
    listed = [
        str(page)
        for item in (items if isinstance(items, list) else [])
        if isinstance(item, dict) and "cluster" in item
        for page in item.get("members") or []
    ]
    return list(dict.fromkeys([*recall_copy_pages(message), *listed]))


def speaker(message: BaseMessage) -> str:
    """The name shown for a message in recalled text."""
    if message.name:
        return str(message.name)
    if isinstance(message, ToolMessage):
        return f"tool:{message.name or 'result'}"
    return {"human": "user", "ai": "assistant"}.get(message.type, message.type)


def message_timestamp(message: BaseMessage) -> datetime | None:
    """``additional_kwargs["timestamp"]`` as an aware datetime (ISO 8601 or epoch seconds)."""
    raw = message.additional_kwargs.get("timestamp")
    if raw is None:
        return None
    try:
        if isinstance(raw, (int, float)):
            return datetime.fromtimestamp(raw, tz=UTC)
        parsed = datetime.fromisoformat(str(raw))
    except (TypeError, ValueError, OverflowError, OSError):
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def message_session(message: BaseMessage) -> str | None:
    """``additional_kwargs["session_id"]``: an explicit session marker, if the app sets one."""
    raw = message.additional_kwargs.get("session_id")
    return None if raw is None else str(raw)


def message_keys(messages: Sequence[BaseMessage]) -> list[str]:
    """Each message's id; a message without one gets a key from its predecessor's
    (``"<id>+1"``), stable while the history is."""
    keys, previous, run_length = [], "^", 0
    for message in messages:
        if message.id:
            previous, run_length = message.id, 0
            keys.append(message.id)
        else:
            run_length += 1
            keys.append(f"{previous}+{run_length}")
    return keys


def displaced_id(key: str, ident: str) -> str:
    """The id of a stand-in shown again after a new message took its id `key` (``"h3~p2"``): one
    no app message has, new for each displacement (a stand-in displaced twice is ``"h3~p2~p2"``)."""
    return f"{key}~{ident}"


def require_messages(messages: object) -> None:
    """Raise unless `messages` is a list of LangChain messages (what `page_messages` pages).

    Raises:
        TypeError: Naming the type given and the conversion to use.
    """
    fix = "convert with `langchain_core.messages.convert_to_messages(...)`"
    if isinstance(messages, (str, bytes, BaseMessage)) or not isinstance(messages, Sequence):
        raise TypeError(f"`messages` must be a list of BaseMessage, got {type(messages).__name__}; {fix}.")
    for i, message in enumerate(messages):
        if not isinstance(message, BaseMessage):
            raise TypeError(
                f"`messages[{i}]` must be a BaseMessage, got {type(message).__name__} ({message!r:.60}); {fix}."
            )


@dataclass(frozen=True)
class Unit:
    """An atomic run of messages that pages never split."""

    start: int
    """Index of the unit's first message in the message list."""
    messages: tuple[BaseMessage, ...]
    """The messages: one, or an AI tool-call message with its ToolMessages."""
    answered: bool = True
    """False for an AI message whose tool calls are not all answered yet."""

    @property
    def end(self) -> int:
        """Index one past the unit's last message."""
        return self.start + len(self.messages)

    @property
    def text(self) -> str:
        """The unit's text, as the model reads it."""
        return "\n".join(message_text(m) for m in self.messages)


def split_units(messages: Sequence[BaseMessage], start: int = 0, stop: int | None = None) -> list[Unit]:
    """Group ``messages[start:stop]`` into units, keeping tool-call groups whole."""
    stop = len(messages) if stop is None else stop
    units: list[Unit] = []
    i = start
    while i < stop:
        message = messages[i]
        calls = tool_call_ids(message)
        if calls:
            pending = set(calls)
            j = i + 1
            while j < stop and pending and isinstance(result := messages[j], ToolMessage):
                pending.discard(result.tool_call_id)
                j += 1
            units.append(Unit(i, tuple(messages[i:j]), answered=not pending))
            i = j
        else:
            units.append(Unit(i, (message,)))
            i += 1
    return units


def tool_call_ids(message: BaseMessage) -> list[str]:
    """Ids of the calls an AI message makes, malformed ones (`invalid_tool_calls`) included:
    `create_agent` answers those with an error ToolMessage, which must stay with its call."""
    if not isinstance(message, AIMessage) or not (message.tool_calls or message.invalid_tool_calls):
        return []
    ids = [call.get("id") for call in message.tool_calls]
    ids += [call.get("id") for call in message.invalid_tool_calls]
    return [i for i in ids if i]


def merge_messages(messages: Sequence[BaseMessage], updates: Sequence[BaseMessage]) -> list[BaseMessage]:
    """`updates` merged into `messages` by LangGraph's own `add_messages` (by id: replaced,
    removed with `RemoveMessage`, appended), as a graph merges a node's output into its state."""
    from langgraph.graph.message import add_messages

    merged: Any = add_messages(list(messages), list(updates))  # type: ignore[arg-type]
    return list(merged)


def dump_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Messages as JSON-safe dicts (LangChain's own format: ids, blocks, tool calls, metadata)."""
    # json.loads is untyped; the round trip of a list of dicts gives a list of dicts
    return cast("list[dict[str, Any]]", json.loads(json.dumps(messages_to_dict(list(messages)), default=str)))


def load_messages(data: Sequence[dict[str, Any]]) -> list[BaseMessage]:
    """Inverse of `dump_messages`."""
    return messages_from_dict(list(data))
