"""How one message reads as text when the model is shown stored messages (a recall result, an LLM
bookmarker's prompt): ``Name [time]: text``, further lines indented, so only the library writes
lines at the margin and stored text cannot pass for a header, another message or a tool result.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import BaseMessage

from langmem_paging.core.messages import speaker
from langmem_paging.core.tokens import message_text

__all__ = ["INDENT", "RENDER_VERSION", "escape_tags", "indented", "render_message"]

RENDER_VERSION = 2
"""The newest rendering (2: ``Name [time]: text`` lines; 1: ``<message>`` elements, still read)."""
INDENT = "  "
"""Continuation lines of a message's text start with this (the margin is the library's)."""

_TAG = re.compile(r"<(/?)(page|message|recalled|cluster)\b", re.IGNORECASE)
_QUOTE = re.compile(r'["<>&]')
_NAME_UNSAFE = re.compile(r"[\s:\[\]=]+")


def escape_tags(text: str) -> str:
    """Neutralize text that could pass for one of the library's tags (version 1)."""
    return _TAG.sub(lambda m: f"&lt;{m.group(1)}{m.group(2)}", text)


def _attr(value: Any) -> str:
    return _QUOTE.sub(
        lambda m: {'"': "&quot;", "<": "&lt;", ">": "&gt;", "&": "&amp;"}[m.group(0)], str(value)
    )


def render_message(message: BaseMessage, version: int = RENDER_VERSION) -> str:
    """One message as recalled: ``Name [time]: text`` with further lines indented (version 2), or
    ``<message from="user" time="...">text</message>``, the text escaped (version 1)."""
    stamp = message.additional_kwargs.get("timestamp")
    if version < 2:
        time = f' time="{_attr(stamp)}"' if stamp is not None else ""
        return (
            f'<message from="{_attr(speaker(message))}"{time}>{escape_tags(message_text(message))}</message>'
        )
    name = _NAME_UNSAFE.sub(" ", speaker(message)).strip() or "someone"
    time = f" [{_NAME_UNSAFE.sub(' ', str(stamp)).strip()}]" if stamp is not None else ""
    return f"{name}{time}: " + indented(message_text(message))


def indented(text: str) -> str:
    """Text whose every line but the first starts with `INDENT`."""
    return text.replace("\r", "").replace("\n", "\n" + INDENT)
