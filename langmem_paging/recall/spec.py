"""What a recall showed, as a typed, versioned record.

A `recall` ToolMessage keeps its spec in its artifact (never sent to the model); the
checkpoint stores it, and when the result ages out of the context it shrinks to a reference
and is rebuilt from the spec and the stored pages (rendering is deterministic). So the spec
is read back after upgrades: `RecallSpec.from_dict` reads every version written so far
(version 3, passage groups headed by the page id alone; version 2, whose passage headers named
the messages shown; version 1, and the unversioned dicts of 0.2, which have the same fields and
render as they did: XML elements). A spec renders in the version it was written in, so a shrunk
result re-expands to exactly the text the model was shown.

Example:
    >>> spec = RecallSpec(items=[PageItem("p3"), PassageItem("p9", [(2, 5)])], max_tokens=500,
    ...                   part_tokens=400, note="", encoding="cl100k_base")
    >>> RecallSpec.from_dict(spec.to_dict()) == spec
    True
    >>> old = RecallSpec.from_dict({"items": [{"page": "p3"}], "max_tokens": 500, "part_tokens": 400,
    ...                             "note": "", "encoding": "cl100k_base"})
    >>> old.items, old.version
    ([PageItem(page='p3', part=None)], 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ClusterItem", "Item", "PageItem", "PassageItem", "RecallSpec", "SPEC_VERSION"]

SPEC_VERSION = 3
"""The newest recall rendering: 3, a search's passage groups headed ``=== p3 ===``; 2, headed
``=== p3 · messages 4-9 of 12 ===`` (message lines as in 3: ``Name [time]: text``,
`langmem_paging.core.rendering.RENDER_VERSION`); 1, XML elements. `langmem_paging.recall.render`
holds what each version changes."""


@dataclass
class PageItem:
    """A whole page, or one part of a long one."""

    page: str
    """The page id."""
    part: int | None = None
    """Which part (1-based) of a page too long for one result; None: the whole page."""

    def to_dict(self) -> dict[str, Any]:
        return {"page": self.page, **({"part": self.part} if self.part is not None else {})}


@dataclass
class PassageItem:
    """Some messages of a page that a search matched, with their neighbours."""

    page: str
    """The page id."""
    spans: list[tuple[int, int]] = field(default_factory=list)
    """Message ranges ``[start, stop)`` of the page, in order."""

    def to_dict(self) -> dict[str, Any]:
        return {"passages": self.page, "spans": [list(s) for s in self.spans]}


@dataclass
class ClusterItem:
    """A cluster: its member pages listed (or their text, when it fits)."""

    cluster: str
    """The cluster id."""
    members: list[str] = field(default_factory=list)
    """Member pages shown (visible on the branch), oldest first."""
    text: bool = False
    """True: the members' text is shown; False: one line per member (id, keywords, size)."""
    more: int = 0
    """Members not listed."""

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "members": list(self.members), "text": self.text, "more": self.more}


Item = PageItem | PassageItem | ClusterItem


@dataclass
class RecallSpec:
    """What a recall result shows, in order, and how it was sized."""

    items: list[Item]
    """Pages, passages and clusters, in the order shown."""
    max_tokens: int
    """The result's size cap."""
    part_tokens: int
    """Size of one part of a long page."""
    note: str = ""
    """Notes to the model (unknown ids, nothing found, a long page's parts, ...)."""
    encoding: str | None = None
    """The tiktoken encoding the result was sized with (rebuilds use the same)."""
    version: int = SPEC_VERSION
    """The rendering it was shown in (`SPEC_VERSION`): 3 and 2 compact lines (3: passage headers
    without their messages' span), 1 XML elements."""
    tool: str = "recall"
    """The recall tool's name (``tool_name``), which the result's notices tell the model to call."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe, versioned."""
        return {
            "v": self.version,
            "items": [item.to_dict() for item in self.items],
            "max_tokens": self.max_tokens,
            "part_tokens": self.part_tokens,
            "note": self.note,
            "encoding": self.encoding,
            **({"tool": self.tool} if self.tool != "recall" else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RecallSpec:
        """Read a stored spec of any version written so far.

        Raises:
            ValueError: For a spec written by a newer version of the library.
        """
        version = data.get("v", 0)
        if version > SPEC_VERSION:
            raise ValueError(
                f"Recall spec version {version} is newer than this langmem-paging reads "
                f"({SPEC_VERSION}); upgrade langmem-paging."
            )
        return cls(
            items=[_item(raw) for raw in data.get("items", [])],
            max_tokens=int(data["max_tokens"]),
            part_tokens=int(data.get("part_tokens", data["max_tokens"])),
            note=data.get("note") or "",
            encoding=data.get("encoding"),
            version=max(1, int(version)),
            tool=str(data.get("tool") or "recall"),
        )


def _item(raw: dict[str, Any]) -> Item:
    if "passages" in raw:
        return PassageItem(raw["passages"], [(int(a), int(b)) for a, b in raw.get("spans", [])])
    if "page" in raw:
        return PageItem(raw["page"], raw.get("part") or None)
    return ClusterItem(
        raw["cluster"], list(raw.get("members", [])), bool(raw.get("text")), int(raw.get("more", 0))
    )
