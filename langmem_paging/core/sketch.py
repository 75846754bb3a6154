"""The thread's keyword sketch: in how many of its pages each of its most frequent terms (stems)
occurs, the document frequencies a bookmarker's thread IDF reads.

A bounded space-saving sketch (`MAX_TERMS` terms): when it is full, a new term takes the place of the
least frequent one and inherits its count, so the frequent terms stay; a term not in it is rare.

Where it lives: with a store (the middleware, the node, `Pager`), one record per thread (``meta`` /
``sketch``), read by a step that forms pages and written by that step's `Commit` in the batch of its
pages; `forget` scrubs it in the batch of the scrubbed pages, `delete_thread` deletes it with the
thread's other records. It is per thread, not per branch, like the search index: a fork or a rewind
counts the pages other branches formed too (bookmarks already made never change; a new page's
words are weighed against everything the thread said). A page is counted once per page number, so
a retried step that forms the same page again (same number, same digest) does not count it twice.
The read and the write are under the thread's lock (the engine holds it from the step to `Commit`);
two processes forming pages of one thread at the same moment may each write the sketch they read,
and the later write loses the other's counts (the pages themselves are not lost: it is a heuristic
for word choice, and the next forming step counts on from there).
With no store (the pure `page_messages`) the caller keeps nothing but the state, so there the sketch
travels in the paging state (`checkpointed`).

Example:
    >>> sketch = TermSketch()
    >>> sketch.count(1, ["lisbon", "ferri"]); sketch.count(2, ["lisbon"]); sketch.count(2, ["lisbon"])
    >>> sketch.doc_freq, sketch.n_pages
    ({'lisbon': 2, 'ferri': 1}, 2)
    >>> TermSketch.from_record(sketch.to_record()) == sketch
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_TERMS", "SKETCH_VERSION", "TermSketch", "add_terms", "grouped", "ungrouped"]

MAX_TERMS = 512
"""Terms whose page frequency the thread keeps (the most frequent; for bookmark IDF)."""
SKETCH_VERSION = 1


@dataclass
class TermSketch:
    """A thread's keyword sketch (see the module docstring)."""

    doc_freq: dict[str, int] = field(default_factory=dict)
    """Pages of the thread holding each of its most frequent terms (at most `MAX_TERMS`)."""
    n_pages: int = 0
    """Pages counted (the IDF's document count)."""
    counted: list[list[int]] = field(default_factory=list)
    """Page-number ranges ``[start, stop)`` already counted (a page is counted once)."""
    checkpointed: bool = False
    """True when it travels in the paging state (no store: the pure `page_messages`)."""

    def holds(self, number: int) -> bool:
        """True if page `number` was counted."""
        return any(a <= number < b for a, b in self.counted)

    def count(self, number: int, terms: Iterable[str]) -> None:
        """Count page `number`'s distinct `terms`, unless that page was counted already."""
        if self.holds(number):
            return
        self.n_pages += 1
        add_terms(self.doc_freq, terms)
        for span in self.counted:
            if span[1] == number:
                span[1] = number + 1
                return
        self.counted.append([number, number + 1])

    def to_record(self) -> dict[str, Any]:
        """The store record's value (JSON-safe, terms grouped by count)."""
        return {
            "v": SKETCH_VERSION,
            "n_pages": self.n_pages,
            "counted": [list(s) for s in self.counted],
            "doc_freq": grouped(self.doc_freq),
        }

    @classmethod
    def from_record(cls, value: dict[str, Any]) -> TermSketch:
        """Parse a store record's value."""
        return cls(
            doc_freq=ungrouped(value.get("doc_freq", {})),
            n_pages=value.get("n_pages", 0),
            counted=[list(s) for s in value.get("counted", [])],
        )


def add_terms(table: dict[str, int], terms: Iterable[str]) -> None:
    """Add one page's distinct terms to `table` (space-saving: when full, a new term takes the
    place of the least frequent one, inheriting its count, so frequent terms stay)."""
    # The weakest term is the first, in the table's order, with the lowest count. Counts only
    # grow, so the terms at the lowest count are listed once and consumed in order (a term
    # whose count grew since is skipped), instead of a scan of the table per new term.
    low = 0
    weakest: Iterator[str] = iter([])
    for term in terms:
        if term in table:
            table[term] += 1
        elif len(table) < MAX_TERMS:
            table[term] = 1
        else:
            while True:
                victim = next(weakest, None)
                if victim is None:
                    low = min(table.values())
                    weakest = iter([t for t, n in table.items() if n == low])
                elif table.get(victim) == low:
                    break
            table[term] = table.pop(victim) + 1


def grouped(doc_freq: dict[str, int]) -> dict[str, str]:
    """The sketch as ``{count: "term term ..."}`` (terms are single words): a third of its size as
    ``{term: count}``, in the order the sketch keeps them."""
    out: dict[int, list[str]] = {}
    for term, count in doc_freq.items():
        out.setdefault(count, []).append(term)
    return {str(count): " ".join(terms) for count, terms in out.items()}


def ungrouped(value: dict[str, Any]) -> dict[str, int]:
    """Read the sketch in either form (``{term: count}`` was written before it was grouped)."""
    if all(isinstance(v, str) for v in value.values()):
        out: dict[str, int] = {}
        for count, terms in value.items():
            out.update(dict.fromkeys(terms.split(), int(count)))
        return out
    return {term: int(count) for term, count in value.items()}
