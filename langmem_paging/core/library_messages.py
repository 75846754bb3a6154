"""Every message the library writes into a context, and what each costs: one home for their shapes.

Evicted text is replaced, at its place, by a short stand-in the model can read and act on:

- a **bookmark** ``[p3:Farid greyhound]`` for an evicted page (under the id of its first message);
- a **cluster bookmark** ``[c2:honey,Bled|p1-p9]`` for a cluster of evicted pages;
- a **warm digest** (the page's key lines) for an evicted page in the warm tier;
- a **tool-result stub** for a large tool result paged as it arrived (same id and call id);
- a **malformed-call stub**: an earlier turn's AI message whose malformed calls' raw arguments went
  into a page (same id and call ids, the arguments left out);
- a **shrunk recall copy**: a `recall` result that aged out, reduced to a reference.

Each carries library metadata (``additional_kwargs["langmem_paging"]``); only the paging state
decides whether a message really is ours (a user can paste the same text or metadata).

Example:
    >>> format_bookmark("p3", ["Caroline", "adoption"])
    '[p3:Caroline,adoption]'
    >>> cluster_keywords({"Honey": 0.9, "honey": 0.8, "Bled": 0.7, "bees": 0.7}, limit=3)
    ['Honey', 'bees', 'Bled']
    >>> format_cluster_bookmark("c2", ["honey", "Bled"], 1, 9, 9)
    '[c2:honey,Bled|p1-p9]'
    >>> format_cluster_bookmark("c4", ["honey"], 1, 40, 12)
    '[c4:honey|12 of p1-p40]'
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langmem_paging.core.messages import METADATA_KEY, library_mark, recall_copy_pages

M = TypeVar("M", bound=BaseMessage)

__all__ = [
    "BOOKMARK_PATTERN",
    "CLUSTER_ID_FOR_ESTIMATES",
    "bookmark_message",
    "bookmark_safe",
    "clip_keyword",
    "cluster_bookmark_text",
    "cluster_bookmark_tokens",
    "cluster_keywords",
    "cluster_message",
    "copy_reference",
    "digest_message",
    "format_bookmark",
    "format_cluster_bookmark",
    "is_shrunk_copy",
    "malformed_call_stub",
    "member_span",
    "parse_bookmark",
    "shrink_recall_copy",
    "stored_form",
    "stub_is_shorter",
    "tool_result_stub",
]

BOOKMARK_PATTERN = re.compile(r"\[(p\d+):([^\[\]\n]*)\]")
"""Matches bookmark-shaped text. Only messages with library metadata are bookmarks."""

CLUSTER_ID_FOR_ESTIMATES = "c0000"
"""The cluster id a cost estimate renders before real ids are reserved: longer than most, so an
estimate errs on the side of the budget."""

_UNSAFE = re.compile(r"[\[\],:|\n]")

MAX_KEYWORD_CHARS = 24
"""The longest word a stand-in shows: a pasted key or hex dump has no spaces, and shown whole in a
cluster bookmark it cost every later prompt its tokens (``max_tokens=700``, 3,000 random characters
pasted three times: 2,424 tokens a prompt, tests/core/test_long_words.py). LoCoMo dev has 534 of its
207,714 words longer (file names, hashes)."""
_LONG_WORD = re.compile(rf"\S{{{MAX_KEYWORD_CHARS + 1},}}")


def bookmark_safe(text: str) -> str:
    """`text` without the characters that delimit a bookmark (``[ ] , : |`` and newlines)."""
    return _UNSAFE.sub("", text)


def clip_keyword(keyword: str) -> str:
    """`keyword` with each of its words cut to `MAX_KEYWORD_CHARS`: the one rule for the length of
    what a bookmark, a cluster bookmark or a stub shows (and of the terms keywords come from).

    Example:
        >>> clip_keyword("k" + "3f" * 40)
        'k3f3f3f3f3f3f3f3f3f3f3f3'
    """
    if len(keyword) <= MAX_KEYWORD_CHARS:
        return keyword
    return _LONG_WORD.sub(lambda m: m.group(0)[:MAX_KEYWORD_CHARS], keyword)


# -- page bookmarks ------------------------------------------------------------------------------


def format_bookmark(page_id: str, keywords: Sequence[str]) -> str:
    """``format_bookmark("p3", ["Caroline", "adoption"])`` -> ``'[p3:Caroline,adoption]'``."""
    return f"[{page_id}:{','.join(map(clip_keyword, keywords))}]"


def parse_bookmark(text: str) -> tuple[str, list[str]] | None:
    """Split bookmark-shaped text into ``(page_id, keywords)``, or None.

    Example:
        >>> parse_bookmark("[p3:Caroline,adoption]")
        ('p3', ['Caroline', 'adoption'])
    """
    match = BOOKMARK_PATTERN.fullmatch(text.strip())
    if match is None:
        return None
    keywords = [k for k in match.group(2).split(",") if k]
    return match.group(1), keywords


def bookmark_message(page_id: str, text: str, message_id: str) -> HumanMessage:
    """The message that shows an evicted page: the id of the page's first message, marked as ours."""
    return HumanMessage(content=text, id=message_id, additional_kwargs={METADATA_KEY: {"bookmark": page_id}})


# -- cluster bookmarks --------------------------------------------------------------------------


def member_span(first: int, last: int, size: int) -> str:
    """``p1-p9`` when the members are every page in between, else ``12 of p1-p40``."""
    if first == last:
        return f"p{first}"
    if last - first + 1 == size:
        return f"p{first}-p{last}"
    return f"{size} of p{first}-p{last}"


def cluster_keywords(terms: Mapping[str, float], limit: int) -> list[str]:
    """The keywords a cluster bookmark shows: its strongest terms, ties by name, each word once
    whatever its case (``Honey`` and ``honey`` are one keyword)."""
    out: dict[str, str] = {}  # by the word's lower case: the first (strongest) spelling
    for term, _ in sorted(terms.items(), key=lambda tw: (-tw[1], tw[0].lower())):
        out.setdefault(term.lower(), term)
        if len(out) >= limit:
            break
    return list(out.values())


def format_cluster_bookmark(
    cluster_id: str, keywords: Sequence[str], first: int, last: int, size: int
) -> str:
    """``[c2:Farid,greyhound,adoption|p1-p9]``."""
    return f"[{cluster_id}:{','.join(map(clip_keyword, keywords))}|{member_span(first, last, size)}]"


def cluster_message(cluster_id: str, text: str, message_id: str) -> HumanMessage:
    """The message that shows a cluster of evicted pages, where its first member page was."""
    return HumanMessage(
        content=text, id=message_id, additional_kwargs={METADATA_KEY: {"cluster": cluster_id}}
    )


def cluster_bookmark_tokens(
    terms: Mapping[str, float],
    span: tuple[int, int, int],
    *,
    max_keywords: int,
    count_message: Callable[[BaseMessage], int],
    cluster_id: str = CLUSTER_ID_FOR_ESTIMATES,
) -> int:
    """Tokens of the cluster bookmark message for a cluster with these `terms` and member `span`
    ``(first, last, size)``, rendered exactly as it will be shown (with `cluster_id`, or a long
    placeholder before ids are reserved)."""
    text = cluster_bookmark_text(cluster_id, terms, span, max_keywords=max_keywords)
    return count_message(cluster_message(cluster_id, text, "x"))


def cluster_bookmark_text(
    cluster_id: str, terms: Mapping[str, float], span: tuple[int, int, int], *, max_keywords: int
) -> str:
    """The cluster bookmark of a cluster with these `terms` and member `span` ``(first, last,
    size)``: its best `max_keywords` terms (`cluster_keywords`) and its member range."""
    first, last, size = span
    return format_cluster_bookmark(cluster_id, cluster_keywords(terms, max_keywords), first, last, size)


# -- warm digests --------------------------------------------------------------------------------


def digest_message(
    page_id: str, digest: str, n_messages: int, message_id: str, *, tool: str = "recall"
) -> HumanMessage:
    """The message that shows a warm page: its digest, marked as the page's stand-in. `tool`: the
    name of paging's recall tool (``tool_name``), which the text tells the model to call."""
    text = (
        f"[{page_id} digest of {n_messages} messages; {tool}(page_ids=['{page_id}']) for all of it]\n{digest}"
    )
    return HumanMessage(
        content=text, id=message_id, additional_kwargs={METADATA_KEY: {"bookmark": page_id, "tier": "warm"}}
    )


# -- tool results paged on arrival ----------------------------------------------------------------


def tool_result_stub(
    page_id: str, result: ToolMessage, call: Mapping[str, Any] | None, tokens: int, *, tool: str = "recall"
) -> ToolMessage:
    """A large tool result paged on arrival: same id and call id, its text replaced by a
    bookmark naming the tool, the call's arguments and the size."""
    name = clip_keyword((call or {}).get("name") or result.name or "tool")
    args = json.dumps((call or {}).get("args", {}), sort_keys=True, default=str, ensure_ascii=False)
    if len(args) > 120:
        args = args[:117] + "..."
    text = (
        f"[{page_id}:{bookmark_safe(name)} result, {tokens} tokens, paged out; "
        f"args {args}; call {tool}(page_ids=['{page_id}']) to read it]"
    )
    return _marked(result, text, {"paged_result": page_id})


def stub_is_shorter(
    result: ToolMessage,
    call: Mapping[str, Any] | None,
    tokens: int,
    count_message: Callable[[BaseMessage], int],
    *,
    tool: str = "recall",
) -> bool:
    """True when the result's stub is shorter than the result: a stub must never make the context
    bigger. Measured with a page id longer than any real one."""
    return count_message(tool_result_stub("p999999", result, call, tokens, tool=tool)) < tokens


def malformed_call_stub(page_id: str, message: AIMessage, tokens: int, *, tool: str) -> AIMessage:
    """An AI message whose malformed calls (`invalid_tool_calls`) went into page `page_id`: same id,
    same calls and call ids (their error results still answer them), the raw arguments left out and
    the text replaced by a note naming the page, the size and the recall tool (`tool`)."""
    names = ", ".join(
        clip_keyword(bookmark_safe(c.get("name") or "tool")) for c in message.invalid_tool_calls
    )
    text = (
        f"[{page_id}:malformed call to {names or 'a tool'}, {tokens} tokens, paged out; "
        f"call {tool}(page_ids=['{page_id}']) to read it]"
    )
    calls = [{**call, "args": ""} for call in message.invalid_tool_calls]
    return _marked(message, text, {"paged_result": page_id}, invalid_tool_calls=calls)


def _marked(message: M, text: str, mark: dict[str, Any], **update: Any) -> M:
    """A copy of `message` (same id) with `text` for its content, `mark` added to the library's mark
    and the fields in `update` replaced."""
    meta = {**message.additional_kwargs.get(METADATA_KEY, {}), **mark}
    kwargs = {**message.additional_kwargs, METADATA_KEY: meta}
    return message.model_copy(update={"content": text, "additional_kwargs": kwargs, **update})


# -- recall copies ----------------------------------------------------------------------------------


def copy_reference(page_ids: Sequence[str], tool: str = "recall") -> str:
    """The shrunk form of a recall result (`tool`: the recall tool's name)."""
    shown = ", ".join(page_ids) if page_ids else "nothing"
    return f"[recalled {shown}; text removed from context, call {tool} again to reread]"


def shrink_recall_copy(message: ToolMessage) -> ToolMessage:
    """The same ToolMessage (same id) with its text replaced by a reference (the artifact keeps
    what rebuilds it: `langmem_paging.recall.render.expand_recall_copy`)."""
    text = copy_reference(recall_copy_pages(message), message.name or "recall")  # the tool that made it
    return _marked(message, text, {"shrunk": True})


def is_result_stub(message: BaseMessage | None) -> bool:
    """True for a tool result paged on arrival (its stub, see `tool_result_stub`)."""
    return isinstance(message, ToolMessage) and bool(library_mark(message).get("paged_result"))


def is_shrunk_copy(message: BaseMessage | None) -> bool:
    """True for a recall result already shrunk to a reference."""
    return (
        message is not None and bool(recall_copy_pages(message)) and bool(library_mark(message).get("shrunk"))
    )


def stored_form(message: BaseMessage) -> BaseMessage:
    """How a message is kept inside a page: a recall result as a reference to its pages (they are
    stored already), anything else as it is."""
    if (
        isinstance(message, ToolMessage)
        and recall_copy_pages(message)
        and not library_mark(message).get("shrunk")
    ):
        return shrink_recall_copy(message)
    return message
