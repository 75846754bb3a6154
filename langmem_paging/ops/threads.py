"""What `threads` lists: the threads a store holds paging records for, with their record counts.

A thread's records live under ``("langmem_paging", <label>, kind)``, where the label is the thread
id escaped by `langmem_paging.storage.page_store.thread_namespace` (LangGraph labels may not hold dots).

Example:
    >>> from langgraph.store.memory import InMemoryStore
    >>> from langmem_paging.storage.page_store import thread_namespace
    >>> store = InMemoryStore()
    >>> store.put(thread_namespace("user.42%", "pages"), "p1", {"messages": []})
    >>> [(row.thread_id, row.pages, row.records) for row in list_threads(store)]
    [('user.42%', 1, 1)]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, cast

from langgraph.store.base import BaseStore, ListNamespacesOp, MatchCondition

from langmem_paging.ops.portable import record_counts
from langmem_paging.storage.page_store import NAMESPACE_ROOT, thread_namespace

__all__ = ["ThreadRow", "list_threads", "thread_label", "thread_of_label"]

_NAMESPACE_BATCH = 500


def thread_label(thread_id: str) -> str:
    """The namespace label of a thread id (`thread_namespace`'s escaping)."""
    return thread_namespace(thread_id, "pages")[1]


def thread_of_label(label: str) -> str:
    """The thread id a namespace label stands for: `thread_label` undone (``%2E`` -> ``.``,
    ``%25`` -> ``%``, in one pass so an escaped ``%`` never turns into a dot).

    Example:
        >>> thread_of_label("a%2Eb%252E")
        'a.b%2E'
        >>> thread_of_label(thread_label("x%2E.y")) == "x%2E.y"
        True
    """
    out, i = [], 0
    while i < len(label):
        escape = label[i : i + 3]
        if escape in ("%2E", "%25"):
            out.append("." if escape == "%2E" else "%")
            i += 3
        else:
            out.append(label[i])
            i += 1
    return "".join(out)


@dataclass
class ThreadRow:
    """One thread the store holds paging records for."""

    thread_id: str
    """The thread id (unescaped)."""
    pages: int
    """Stored pages (all branches)."""
    clusters: int
    """Stored cluster nodes."""
    records: int
    """Store records of every kind (pages, clusters, parents, stats, meta)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe."""
        return asdict(self)


def _labels(store: BaseStore) -> list[str]:
    """Every thread label under the library's namespace root (paged through the store)."""
    labels: set[str] = set()
    offset = 0
    while True:
        op = ListNamespacesOp(
            match_conditions=(MatchCondition("prefix", (NAMESPACE_ROOT,)),),
            max_depth=2,
            limit=_NAMESPACE_BATCH,
            offset=offset,
        )
        batch = cast(list[tuple[str, ...]], store.batch([op])[0])
        labels.update(ns[1] for ns in batch if len(ns) >= 2 and ns[0] == NAMESPACE_ROOT)
        offset += len(batch)
        if len(batch) < _NAMESPACE_BATCH:
            return sorted(labels)


def list_threads(store: BaseStore) -> list[ThreadRow]:
    """The threads `store` holds paging records for, by thread id, with their record counts.

    Threads that only have checkpoints (nothing paged out yet) hold no store record and are not listed.
    """
    rows = []
    for label in _labels(store):
        thread_id = thread_of_label(label)
        counts = record_counts(store, thread_id)
        if any(counts.values()):
            rows.append(
                ThreadRow(
                    thread_id=thread_id,
                    pages=counts["pages"],
                    clusters=counts["clusters"],
                    records=sum(counts.values()),
                )
            )
    return sorted(rows, key=lambda r: r.thread_id)
