"""How recalled pages read to the model, and how a recall result shrinks and re-expands.

A `recall` ToolMessage carries the text of pages that live in the store. When it
ages out of the context it is not stored again as a new page: its content
shrinks to a reference (`copy_reference`). Because rendering is deterministic,
`expand_recall_copy` rebuilds the original content exactly from the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langchain_core.messages import BaseMessage, ToolMessage

from langmem_paging.messages import METADATA_KEY, recall_copy_pages, speaker
from langmem_paging.records import Page
from langmem_paging.tokens import TokenCounter, message_text

__all__ = ["copy_reference", "expand_recall_copy", "recall_artifact", "render_pages", "shrink_recall_copy"]


def render_message(message: BaseMessage) -> str:
    """One line per message: ``[timestamp] speaker: text``."""
    stamp = message.additional_kwargs.get("timestamp")
    prefix = f"[{stamp}] " if stamp is not None else ""
    return f"{prefix}{speaker(message)}: {message_text(message)}"


def render_pages(pages: Sequence[Page], *, max_tokens: int, counter: TokenCounter, note: str = "") -> str:
    """The recall result: `note`, then each page's messages in order, cut at `max_tokens`."""
    count_text, truncate_text = counter.count_text, counter.truncate_text
    parts = [note] if note else []
    used = count_text(note) if note else 0
    for page in pages:
        body = "\n".join([f"--- page {page.id} ---", *(render_message(m) for m in page.messages)])
        cost = count_text(body)
        if used + cost > max_tokens:
            omitted = ", ".join(p.id for p in pages[pages.index(page) :])
            tail = f"\n[recall size cap of {max_tokens} tokens reached; not shown in full: {omitted}]"
            room = max(0, max_tokens - used - count_text(tail))
            parts.append(truncate_text(body, room) + tail)
            break
        parts.append(body)
        used += cost
    return "\n".join(parts)


def recall_artifact(page_ids: Sequence[str], *, max_tokens: int, note: str) -> dict:
    """What a recall ToolMessage keeps (never sent to the model) to be shrunk and re-expanded."""
    return {METADATA_KEY: {"recalled": list(page_ids), "max_tokens": max_tokens, "note": note}}


def copy_reference(page_ids: Sequence[str]) -> str:
    """The shrunk form of a recall result."""
    return f"[recalled {', '.join(page_ids)}; text removed from context, call recall again to reread]"


def shrink_recall_copy(message: ToolMessage) -> ToolMessage:
    """The same ToolMessage (same id) with its text replaced by a reference."""
    return message.model_copy(update={"content": copy_reference(recall_copy_pages(message))})


def expand_recall_copy(message: ToolMessage, pages: Mapping[str, Page], counter: TokenCounter) -> ToolMessage:
    """Rebuild a shrunk recall result exactly, from the stored pages it referenced."""
    meta = message.artifact[METADATA_KEY]
    recalled = [pages[page_id] for page_id in meta["recalled"]]
    content = render_pages(recalled, max_tokens=meta["max_tokens"], counter=counter, note=meta["note"])
    return message.model_copy(update={"content": content})
