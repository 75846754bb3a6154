"""Recall: the tool the model calls, and the service behind it (plan -> read -> size -> render).

- `tool`: `make_recall_tool`, the `recall` tool (sync and async);
- `plan`: what the model asked for, normalized;
- `service`: reads what the branch may see, sizes and renders the result (a flow of requests);
- `spec`: the typed, versioned record of what a result showed (kept in its artifact);
- `render`: how recalled text reads, and how a shrunk result is rebuilt exactly;
- `passages`: search hits with their neighbours, packed into the room;
- `feedback`: the second hop's follow-up query, from the first hits' distinctive terms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["RECALL_DESCRIPTION", "SCHEMA_HELP", "make_recall_tool"]

if TYPE_CHECKING:
    from langmem_paging.recall.tool import RECALL_DESCRIPTION, SCHEMA_HELP, make_recall_tool


def __getattr__(name: str) -> Any:
    # lazy: the tool imports the pager, which imports the recall service from this package
    if name in __all__:
        from langmem_paging.recall import tool

        return getattr(tool, name)
    raise AttributeError(f"module 'langmem_paging.recall' has no attribute {name!r}")
