"""Records the page store keeps: a page (immutable once formed) and a cluster node.

A page is written once, when it is formed, with everything needed to show it
again: its exact messages, its bookmark, and the features policies computed for
it (a vector, say). What changes afterwards (is it evicted? how often was it
recalled? which cluster holds it?) is decided per branch and lives in the
checkpoint (`langmem_paging.core.state.PagingState`); the store only mirrors access
counts for operators.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from langchain_core.messages import BaseMessage

from langmem_paging.core.messages import dump_messages, load_messages

__all__ = [
    "ClusterNode",
    "Page",
    "Reservation",
    "cluster_number",
    "escape_text",
    "is_id",
    "messages_digest",
    "page_number",
    "unescape_text",
]

_REFUSED_IN_JSON = re.compile(r"(?<!\\)(?:\\\\)*\\u0000|[\ud800-\udfff]")
"""What a database refuses in text, as JSON writes it: NUL (PostgreSQL's text and JSONB) and surrogate
code points (not UTF-8: a lone one, as a cut emoji or a `surrogateescape`-decoded file leaves)."""
_ESCAPES = re.compile(r"[\\\x00\ud800-\udfff]")
_UNESCAPES = re.compile(r"\\(\\|0|u[0-9a-f]{4})")
ESCAPED_KEY = "text_escape"
"""Key a record's dict carries (value 1) when its strings went through `escape_text`: records
without it (every record with nothing refused, and every record older versions wrote) are read
as they are, so the escape costs nothing where nothing needs it."""


def escape_text(text: str) -> str:
    r"""`text` with what databases refuse spelled out, reversibly: a backslash doubled, NUL as
    ``\0``, a lone surrogate as ``\u`` and its four hex digits (``\udc80``). `unescape_text` gives back the exact original.

    Example:
        >>> escape_text("a\x00b\\0")
        'a\\0b\\\\0'
        >>> unescape_text(escape_text("a\x00b\\0\ud800")) == "a\x00b\\0\ud800"
        True
    """
    return _ESCAPES.sub(_escape_one, text)


def unescape_text(text: str) -> str:
    """Inverse of `escape_text`."""
    return _UNESCAPES.sub(_unescape_one, text)


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    return "\\\\" if char == "\\" else "\\0" if char == "\x00" else f"\\u{ord(char):04x}"


def _unescape_one(match: re.Match[str]) -> str:
    code = match.group(1)
    return "\\" if code == "\\" else "\x00" if code == "0" else chr(int(code[1:], 16))


def _refused(value: Any) -> bool:
    """Whether a string in `value` (a record's JSON dict) holds what a database refuses, read off its
    JSON text: a NUL is written ``\\u0000`` there (after an even run of backslashes: an odd one is a
    literal backslash), a surrogate as itself (the one thing UTF-8 cannot encode). The text is orjson's
    (2 us on a 1.5 kB page record, `json.dumps` 26); what orjson refuses (a surrogate, a key that is not a
    string, a numpy float) or writes where `json` would not (a datetime, a dataclass) is `json`'s. The
    pattern runs only on a text holding ``\\u0000``."""
    try:
        text = orjson.dumps(
            value, option=orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
        ).decode()
    except orjson.JSONEncodeError:
        text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode()
    except UnicodeEncodeError:
        return True
    return "\\u0000" in text and _REFUSED_IN_JSON.search(text) is not None


def _map_strings(value: Any, convert: Any) -> Any:
    if isinstance(value, str):
        return convert(value)
    if isinstance(value, dict):
        return {convert(k) if isinstance(k, str) else k: _map_strings(v, convert) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_strings(v, convert) for v in value]
    return value


def storable(data: dict[str, Any]) -> dict[str, Any]:
    """A record's JSON dict as any store can keep it: unchanged when no string holds what a database
    refuses, else every string escaped and `ESCAPED_KEY` set (one rule for every record kind)."""
    if not _refused(data):
        return data
    return {**_map_strings(data, escape_text), ESCAPED_KEY: 1}


def from_storable(data: dict[str, Any]) -> dict[str, Any]:
    """Inverse of `storable`."""
    if not data.get(ESCAPED_KEY):
        return data
    return {k: v for k, v in _map_strings(data, unescape_text).items() if k != ESCAPED_KEY}


def page_number(page_id: str) -> int:
    """``"p12"`` -> 12; raises ValueError for anything else."""
    return _number(page_id, "p")


def cluster_number(cluster_id: str) -> int:
    """``"c3"`` -> 3; raises ValueError for anything else."""
    return _number(cluster_id, "c")


def is_id(ident: object, number: Callable[[str], int]) -> bool:
    """True if `number` (`page_number`, `cluster_number`) reads `ident`: anything stored is checked."""
    try:
        number(ident)  # type: ignore[arg-type]
    except ValueError:
        return False
    return True


def _number(ident: str, prefix: str) -> int:
    if not (isinstance(ident, str) and ident[:1] == prefix and ident[1:].isdigit() and ident[1:2] != "0"):
        raise ValueError(f"not a {'page' if prefix == 'p' else 'cluster'} id: {ident!r}")
    return int(ident[1:])


def messages_digest(messages: Sequence[BaseMessage]) -> str:
    """A short digest of messages' ids, types and content: equal digests mean the same page."""
    h = hashlib.blake2b(digest_size=8)
    for message in messages:
        h.update(f"{message.id}\x1f{message.type}\x1f{message.content!r}\x1e".encode())
    return h.hexdigest()


class Reservation(list[int]):
    """Numbers handed out for new records (a list of ints), with `held`: the stored record at each
    number that already holds the same digest (a retried step, or another branch that made the
    same page), by number. A record is never rewritten: whoever reserved a held number takes
    the stored record as it is (`step.form`), and `PageStore.commit` writes no record twice.

    Example:
        >>> numbers = Reservation([3, 4], held={3: {"id": "p3"}})
        >>> numbers == [3, 4], numbers.held[3]["id"]
        (True, 'p3')
    """

    def __init__(self, numbers: Sequence[int] = (), held: dict[int, dict[str, Any]] | None = None) -> None:
        super().__init__(numbers)
        self.held: dict[int, dict[str, Any]] = held or {}
        """Stored record values at numbers already holding the same digest."""


@dataclass
class Page:
    """One page, whole and exact, as the page store keeps it."""

    id: str
    """Page id, ``p1``, ``p2``, ...: per thread, never reused, also across branches."""
    messages: list[BaseMessage]
    """The page's messages exactly as they were (ids, content blocks, tool calls, metadata).
    A `recall` result inside the page is kept as a reference to the pages it copied, and a
    tool result paged on arrival as its stub: `reconstruct_history` expands both."""
    bookmark: str
    """The bookmark that stands in the context where the page was, ``[p3:kw1 kw2]``."""
    keywords: list[str]
    """The bookmark's keywords, most distinctive first."""
    token_count: int
    """Tokens of the page's messages as the model saw them."""
    boundary: str
    """Name of the boundary strategy that cut the page (``tool_result`` for a result paged on arrival)."""
    created_turn: int
    """User turn in which the page was formed."""
    order: int = 0
    """History ordinal of its first message: sorting pages and resident messages by it gives
    the thread's history in order."""
    digest: str = ""
    """`messages_digest` of `messages`: tells this page from another one given the same id."""
    kind: Literal["page", "tool_result"] = "page"
    """``page`` (a run of messages) or ``tool_result`` (one large tool result paged on arrival)."""
    features: dict[str, Any] = field(default_factory=dict)
    """Per-page features computed once when the page formed (e.g. ``terms``, a vector)."""
    access_count: int = 0
    """How many times `recall` returned this page (mirrored from the checkpoint)."""
    last_access: int = 0
    """User turn of the latest recall (``created_turn`` until recalled)."""

    def __post_init__(self) -> None:
        if not self.last_access:
            self.last_access = self.created_turn

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict for a LangGraph store (access statistics are kept apart)."""
        data = {
            name: getattr(self, name)
            for name in self.__dataclass_fields__
            if name not in ("messages", "access_count", "last_access")
        }
        data["keywords"] = list(self.keywords)
        data["features"] = dict(self.features)
        data["messages"] = dump_messages(self.messages)
        return storable(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Page:
        """Inverse of `to_dict`."""
        data = from_storable(data)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**{**known, "messages": load_messages(data["messages"])})


@dataclass
class ClusterNode:
    """A node of the union-find forest over pages, immutable once written.

    Every union makes a new node (with a new id) whose children are the two things
    it joined, so a node's members never change and no branch can alter another
    branch's clusters. The checkpoint holds the current roots.
    """

    id: str
    """Cluster id, ``c1``, ``c2``, ...: per thread, never reused."""
    children: list[str]
    """Page ids and cluster ids this node joined, oldest first."""
    size: int
    """Pages under this node."""
    first_page: int
    """Lowest page number under this node."""
    last_page: int
    """Highest page number under this node."""
    bookmark: str
    """Its cluster bookmark, ``[c2:Farid,greyhound|p1-p9]``."""
    keywords: list[str] = field(default_factory=list)
    """Keywords of the bookmark."""
    terms: dict[str, float] = field(default_factory=dict)
    """Weighted terms summarizing the members (for similarity)."""
    digest: str = ""
    """Digest of `children`: tells this node from another one given the same id."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict for a LangGraph store (what `asdict` returns: its fields hold strings and
        numbers, so no recursive copy)."""
        return storable(
            {
                "id": self.id,
                "children": list(self.children),
                "size": self.size,
                "first_page": self.first_page,
                "last_page": self.last_page,
                "bookmark": self.bookmark,
                "keywords": list(self.keywords),
                "terms": dict(self.terms),
                "digest": self.digest,
            }
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClusterNode:
        """Inverse of `to_dict`."""
        data = from_storable(data)
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})
