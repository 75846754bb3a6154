"""How recalled pages read to the model, and how a recall result shrinks and re-expands.

Recalled text is compact and delimited (spec version 3): a page starts with a header line
(``=== p3 · 12 messages ===`` for a whole page, ``=== p3 · part 2 of 5 ===`` for a part,
``=== p3 ===`` over a search's passages) and each message is one ``Name [time]: text`` line; a
message's further lines are indented by two spaces. So only the library writes lines that start
at the margin: stored text that looks like a header or a speaker line is indented, and a stored
page cannot impersonate a tool result, another page or another message. Results stored with an
older version render as they were: version 2 named a passage group's messages in its header
(``=== p3 · messages 4-9 of 12 ===``: 14-17 tokens a group, ~9% of a search result at B=2000
on LoCoMo dev in issue 24's diagnosis, 20 questions), version 1 wrote ``<page id="p3">`` /
``<message from="user">`` elements (text that could pass for a tag escaped).

A `recall` ToolMessage carries the text of pages that live in the store. When it ages out
of the context it is not stored again: its content shrinks to a reference
(`langmem_paging.core.library_messages.shrink_recall_copy`), and because rendering is
deterministic (`render_recall` from the `RecallSpec` kept in the artifact) the original
content is rebuilt exactly from the store (`expand_recall_copy`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import ToolMessage

from langmem_paging.core.blocks import Block, block_tokens, blocks_in, media_blocks
from langmem_paging.core.messages import METADATA_KEY
from langmem_paging.core.records import ClusterNode, Page
from langmem_paging.core.rendering import INDENT, escape_tags, render_message
from langmem_paging.core.tokens import TokenCounter, shared_counter
from langmem_paging.recall.spec import SPEC_VERSION, ClusterItem, Item, PageItem, PassageItem, RecallSpec

__all__ = [
    "clip_note",
    "expand_recall_copy",
    "items_tokens",
    "media_shown",
    "member_line",
    "page_parts",
    "passage_header",
    "passages_cost",
    "recall_artifact",
    "render_page",
    "render_passages",
    "render_recall",
    "render_recall_shown",
    "with_media",
]

NOTE_MAX_TOKENS = 200
"""A note (which may echo what the model sent) never takes more than this, nor half the cap."""

GetPage = Callable[[str], "Page | None"]
GetNode = Callable[[str], "ClusterNode | None"]


PART_MIN_TOKENS = 96
"""Parts are not cut smaller than this while the room is shared (several pages, or several recall
calls at once): the result says to recall fewer at a time instead of showing a few words each."""


def _header(label: str, detail: str) -> str:
    return f"=== {label} · {detail} ===" if detail else f"=== {label} ==="


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def render_page(page: Page, version: int = SPEC_VERSION) -> str:
    """A whole page: its header and its messages (version 2), or one ``<page>`` element (1)."""
    body = "\n".join(render_message(m, version) for m in page.messages)
    if version < 2:
        return f'<page id="{page.id}">\n{body}\n</page>'
    return _header(page.id, _plural(len(page.messages), "message")) + "\n" + body


def page_parts(page: Page, part_tokens: int, counter: TokenCounter, version: int = SPEC_VERSION) -> list[str]:
    """The page's rendering cut into parts of at most `part_tokens` tokens each, at message
    boundaries when possible (a longer message is cut by tokens). Joined, the parts' message
    lines are the page's message lines. Every part carries message text."""
    if version >= 2:
        return _compact_parts(page, max(part_tokens, 32), counter)
    lines = [render_message(m, version) for m in page.messages]
    budget = max(16, part_tokens - 24)  # room for the part's own <page ...> tags
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for line in lines:
        cost = counter.count_text(line) + 1
        if cost > budget:
            if current:
                chunks.append("\n".join(current))
                current, used = [], 0
            chunks.extend(_split_message(line, budget, counter))
            continue
        if used + cost > budget and current:
            chunks.append("\n".join(current))
            current, used = [], 0
        current.append(line)
        used += cost
    if current or not chunks:
        chunks.append("\n".join(current))
    n = len(chunks)
    return [
        f'<page id="{page.id}" part="{i + 1}" of="{n}">\n{chunk}\n</page>' for i, chunk in enumerate(chunks)
    ]


def _compact_parts(page: Page, part_tokens: int, counter: TokenCounter) -> list[str]:
    """Version 2 parts: whole message lines while they fit; a longer message is cut by tokens, its
    pieces after the first indented (they continue its text)."""
    budget = part_tokens - 16  # the part's header
    chunks: list[list[str]] = [[]]
    used = 0
    for message in page.messages:
        line = render_message(message)
        cost = counter.count_text(line) + 1
        if cost > budget:  # the speaker and the first piece of text, then the text indented
            cut = line.index(": ") + 2
            prefix, text = line[:cut], line[cut:]
            first = max(8, budget - counter.count_text(prefix) - 2)
            head = next(iter(_split_tokens(text, first, counter)), "")
            rest = _split_tokens(text[len(head) :], budget - 4, counter)
            lines = [prefix + head, *(INDENT + piece for piece in rest)]
        else:
            lines = [line]
        for piece in lines:
            cost = counter.count_text(piece) + 1
            if used + cost > budget and chunks[-1]:
                chunks.append([])
                used = 0
            chunks[-1].append(piece)
            used += cost
    n = len(chunks)
    return [
        _header(page.id, f"part {i + 1} of {n}") + "\n" + "\n".join(chunk) for i, chunk in enumerate(chunks)
    ]


def _split_message(line: str, size: int, counter: TokenCounter) -> list[str]:
    """A long ``<message ...>text</message>`` line cut into pieces of about `size` tokens, never
    inside its tags: a cut there left a part ending in a half tag (``<message from="user" ti``),
    which swallowed the part's ``</page>``. A tag that does not fit with text is a piece alone."""
    head_end = line.index(">") + 1  # attribute values are escaped: no ">" inside the tag
    head, body, tail = line[:head_end], line[head_end : -len("</message>")], "</message>"
    pieces = _split_tokens(body, size, counter) or [""]
    tokens = counter.count_text
    if tokens(head) + tokens(pieces[0]) <= size:
        pieces[0] = head + pieces[0]
    else:
        pieces.insert(0, head)
    if tokens(pieces[-1]) + tokens(tail) <= size:
        pieces[-1] += tail
    else:
        pieces.append(tail)
    return [p for p in pieces if p]


def _split_tokens(text: str, size: int, counter: TokenCounter) -> list[str]:
    tokens = counter.encoding.encode_ordinary(text)
    out, start = [], 0
    while start < len(tokens):
        end = min(len(tokens), start + size)
        piece = counter.encoding.decode_bytes(tokens[start:end])
        # do not cut a character in two: move the cut back to a whole character
        while end > start + 1 and not _decodes(piece):
            end -= 1
            piece = counter.encoding.decode_bytes(tokens[start:end])
        out.append(piece.decode("utf-8", errors="replace"))
        start = end
    return out


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def render_passages(page: Page, spans: Sequence[Sequence[int]], version: int = SPEC_VERSION) -> str:
    """Some messages of a page, in order, under `passage_header`; ``...`` marks messages left out
    between spans."""
    lines = []
    for k, (a, b) in enumerate(spans):
        if k and a > spans[k - 1][1]:
            lines.append("...")
        lines += [render_message(m, version) for m in page.messages[a:b]]
    if version < 2:
        return passage_header(page, spans, version) + "\n" + "\n".join(lines) + "\n</page>"
    return passage_header(page, spans, version) + "\n" + "\n".join(lines)


def passage_header(page: Page, spans: Sequence[Sequence[int]], version: int = SPEC_VERSION) -> str:
    """The line over a page's passages: the page id alone (version 3), or with the messages shown
    (``=== p3 · messages 4-9, 12 of 20 ===``, version 2; an ``excerpt`` attribute, version 1).

    The span took 14-17 tokens a group, ~9% of a search result at B=2000, and the lines below tell
    which messages they are; the recall tool's description says a search result is excerpts and
    `recall(page_ids=[...])` brings a whole page. LoCoMo dev, all 7 conversations, search reader,
    against the span headers (paired): evidence coverage +0.007 [+0.002, +0.013] / +0.000 / +0.004
    at B=2000 / 4000 / 8000, multi-hop +0.026 [+0.005, +0.046] / +0.005 / +0.010 (another run of
    the same code: +0.002 at 8000, multi-hop +0.021 at 2000; runs differ by a question or two).
    An earlier run with ``=== p16 (5) ===``, naming how many, gained less."""
    if version >= 3:
        return _header(page.id, "")
    shown = ", ".join(f"{a + 1}-{b}" if b - a > 1 else f"{a + 1}" for a, b in spans)
    n = len(page.messages)
    if version < 2:
        return f'<page id="{page.id}" excerpt="messages {shown} of {n}">'
    return _header(page.id, f"messages {shown} of {n}")


def passages_cost(
    page: Page, spans: Sequence[Sequence[int]], counter: TokenCounter, line_tokens: Callable[[int], int]
) -> int:
    """Tokens `render_passages` (the current version) takes in a result (its body and newline, as
    `render_recall_shown` counts them), from the tokens of each message's line with its newline
    (`line_tokens(index)`: ``count(render_message(m) + "\n")``, which a caller may cache). A line
    starts a new pre-token, so only its end merges with the newline; one token covers the last
    line's newline, which the body does not carry. Never under the rendering's count, at most a
    token over (packing many hits re-renders nothing)."""
    gaps = sum(1 for k in range(1, len(spans)) if spans[k][0] > spans[k - 1][1])
    header = counter.count_text(passage_header(page, spans) + "\n")
    return header + sum(line_tokens(i) for a, b in spans for i in range(a, b)) + gaps * _GAP_TOKENS + 1


_GAP_TOKENS = 1
"""``...`` and its newline (one pre-token: punctuation takes the newline)."""


def member_line(page: Page) -> str:
    """A cluster member: its id, all the keywords kept with it, its size."""
    keywords = ",".join(page.keywords) if page.keywords else page.bookmark
    return f"[{page.id}:{keywords}] {page.token_count} tokens"


def render_recall(
    spec: RecallSpec, get_page: GetPage, get_node: GetNode | None, counter: TokenCounter
) -> str:
    """The recall result for `spec` (what was asked and found), within ``spec.max_tokens``."""
    return render_recall_shown(spec, get_page, get_node, counter)[0]


def render_recall_shown(
    spec: RecallSpec, get_page: GetPage, get_node: GetNode | None, counter: TokenCounter
) -> tuple[str, list[str]]:
    """`render_recall`, and the ids of the items that fit (pages and clusters).

    The whole result fits ``spec.max_tokens``: the note (clipped), the items that fit with the
    image and file blocks they bring (`with_media`, counted by `langmem_paging.core.blocks`), and
    the notice naming those that did not (room for it is kept when something is left out)."""
    cap = spec.max_tokens
    note = clip_note(spec.note, cap, counter)
    room = cap - (counter.count_text(note) + 1 if note else 0)
    bodies = [b for b in (_item_body(item, spec, get_page, get_node, counter) for item in spec.items) if b]
    fill = _Fill(note, get_page, counter)
    parts, shown, omitted, used = fill(bodies, room)
    if omitted:  # keep room for the notice, which may leave out more
        parts, shown, omitted, used = fill(bodies, room - _notice_reserve(cap, counter))
        notice = _cap_notice(cap, omitted, room - used, counter, spec.tool)
        parts += [notice] if notice else []
    return "\n".join([note, *parts] if note else parts), shown


def items_tokens(spec: RecallSpec, get_page: GetPage, get_node: GetNode | None, counter: TokenCounter) -> int:
    """Tokens `spec`'s items take in a result as `render_recall_shown` counts them (each body and
    its newline, and the blocks it brings), the note aside: what is left of the cap is the room for
    more."""
    bodies = [b for b in (_item_body(item, spec, get_page, get_node, counter) for item in spec.items) if b]
    return _Fill("", get_page, counter)(bodies, sys.maxsize)[3]


def clip_note(note: str, cap: int, counter: TokenCounter) -> str:
    """The note within `NOTE_MAX_TOKENS` and half the cap, escaped as page text is: it may echo what
    the model sent (a query, a malformed id), which must not pass for recall structure."""
    note = escape_tags(note).replace("\r", " ").replace("\n", " ")
    note_cap = min(NOTE_MAX_TOKENS, max(32, cap // 2))
    if note and counter.count_text(note) > note_cap:
        return counter.truncate_text(note, note_cap - 2) + " ..."
    return note


def _item_body(
    item: Item, spec: RecallSpec, get_page: GetPage, get_node: GetNode | None, counter: TokenCounter
) -> tuple[str, str] | None:
    """An item's label and text, or None when what it names is gone."""
    version = spec.version
    if isinstance(item, PassageItem):
        page = get_page(item.page)
        return None if page is None else (item.page, render_passages(page, item.spans, version))
    if isinstance(item, PageItem):
        page = get_page(item.page)
        if page is None:
            return None
        if item.part:
            pieces = page_parts(page, spec.part_tokens, counter, version)
            return item.page, pieces[min(item.part, len(pieces)) - 1]
        return item.page, render_page(page, version)
    return _cluster_body(item, get_page, get_node, version, spec.tool)


def _cluster_body(
    item: ClusterItem, get_page: GetPage, get_node: GetNode | None, version: int, tool: str = "recall"
) -> tuple[str, str] | None:
    node = get_node(item.cluster) if get_node else None
    if node is None:
        return None
    members = [p for p in (get_page(pid) for pid in item.members) if p is not None]
    inner = "\n".join(render_page(p, version) if item.text else member_line(p) for p in members)
    tail = f"\n({item.more} more member pages not listed: {tool} them by id, or search)" if item.more else ""
    if version < 2:
        return item.cluster, f'<cluster id="{node.id}" pages="{node.size}">\n{inner}{tail}\n</cluster>'
    return item.cluster, _header(node.id, _plural(node.size, "page")) + f"\n{inner}{tail}"


class _Fill:
    """Fits a result's bodies to its room, in order: each costs its text and newline, and the image
    and file blocks it brings that the result does not carry yet (`media_shown` over the text so
    far, the note included, and the pages shown so far: the blocks `with_media` attaches)."""

    def __init__(self, note: str, get_page: GetPage, counter: TokenCounter) -> None:
        self.note, self.get_page, self.counter = note, get_page, counter

    def __call__(
        self, bodies: list[tuple[str, str]], room: int
    ) -> tuple[list[str], list[str], list[str], int]:
        """The texts that fit in `room` tokens, their labels, the labels left out, the tokens used."""
        parts: list[str] = []
        shown: list[str] = []
        omitted: list[str] = []
        carried: list[Block] = []
        used = 0
        for label, body in bodies:
            brings = self._brings([*parts, body], [*shown, label], carried)
            cost = (
                self.counter.count_text(body)
                + 1
                + sum(block_tokens(b, self.counter.count_text) for b in brings)
            )
            if used + cost > room:
                omitted.append(label)
                continue
            parts.append(body)
            shown.append(label)
            carried += brings
            used += cost
        return parts, shown, omitted, used

    def _brings(self, parts: list[str], labels: list[str], carried: list[Block]) -> list[Block]:
        """The blocks the result with `parts` attaches that it did not carry before (none, and no
        text joined, while no page among `labels` has any)."""
        pages = (self.get_page(label) for label in labels if label.startswith("p"))
        if not any(media_blocks(m.content) for page in pages if page is not None for m in page.messages):
            return []
        blocks = media_shown("\n".join([self.note, *parts]), labels, self.get_page)
        return [b for b in blocks if not any(b is c for c in carried)]


def _notice_text(cap: int, labels: str, *, short: bool, tool: str = "recall") -> str:
    if short:
        return f"[size cap reached; not shown: {labels}]"
    return (
        f"[recall size cap of {cap} tokens reached; not shown: {labels}. "
        f"Recall fewer at a time, or an oversized page by parts: {tool}(page_ids=[...], part=1).]"
    )


def _notice_reserve(cap: int, counter: TokenCounter) -> int:
    """Tokens kept for the notice: its short form naming one id and how many more."""
    return counter.count_text(_notice_text(cap, "p99999 and 99999 more", short=True)) + 1


def _cap_notice(cap: int, omitted: list[str], room: int, counter: TokenCounter, tool: str = "recall") -> str:
    """The notice naming what did not fit, within `room` tokens: the long form if it fits, else the
    short one, naming fewer ids ("and N more") as needed; empty when not even that fits."""
    counts = sorted({len(omitted), *(n for n in (20, 10, 5, 3, 1) if n < len(omitted))}, reverse=True)
    for short in (False, True):
        for n in counts:
            labels = ", ".join(omitted[:n]) + (f" and {len(omitted) - n} more" if n < len(omitted) else "")
            notice = _notice_text(cap, labels, short=short, tool=tool)
            if counter.count_text(notice) + 1 <= room:
                return notice
    return ""


def with_media(content: str, page_ids: Sequence[str], get_page: GetPage) -> str | list[str | Block]:
    """The recalled text, followed by the original image and file blocks of the messages it shows
    (`media_shown`): the model sees the image again, not a description of it. Text alone when none
    shows."""
    blocks: list[str | Block] = [*media_shown(content, page_ids, get_page)]
    return [{"type": "text", "text": content}, *blocks] if blocks else content


def media_shown(content: str, labels: Sequence[str], get_page: GetPage) -> list[Block]:
    """The image and file blocks of the pages among `labels` whose placeholders `content` shows
    (`langmem_paging.core.blocks`), each once: what `with_media` attaches and the fit counts."""
    candidates = (
        b
        for label in labels
        if label.startswith("p") and (page := get_page(label)) is not None
        for m in page.messages
        for b in media_blocks(m.content)
    )
    return blocks_in(content, candidates)


def recall_artifact(spec: RecallSpec, page_ids: Sequence[str]) -> dict[str, Any]:
    """What a recall ToolMessage keeps (never sent to the model) to be shrunk and re-expanded."""
    return {METADATA_KEY: {"recalled": list(page_ids), "spec": spec.to_dict()}}


def expand_recall_copy(
    message: ToolMessage, get_page: GetPage, counter: TokenCounter, get_node: GetNode | None = None
) -> ToolMessage:
    """Rebuild a shrunk recall result exactly, from the stored pages it referenced (with the
    tokenizer the spec names, else `counter`)."""
    spec = RecallSpec.from_dict(message.artifact[METADATA_KEY]["spec"])
    if spec.encoding and spec.encoding != counter.encoding.name:
        counter = shared_counter(spec.encoding)
    content = with_media(
        render_recall(spec, get_page, get_node, counter),
        message.artifact[METADATA_KEY].get("recalled", []),
        get_page,
    )
    meta = {k: v for k, v in message.additional_kwargs.get(METADATA_KEY, {}).items() if k != "shrunk"}
    kwargs = {k: v for k, v in message.additional_kwargs.items() if k != METADATA_KEY}
    if meta:
        kwargs[METADATA_KEY] = meta
    return message.model_copy(update={"content": content, "additional_kwargs": kwargs})
