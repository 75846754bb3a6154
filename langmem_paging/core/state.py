"""The paging state that travels with the graph's checkpoint.

What decides the view lives here, per branch: which formed pages are resident,
which are shown as bookmarks (or digests), the cluster roots, access statistics,
the id counters and which ids this branch allocated. Fork, rewind, `update_state`
and time travel therefore just work. Everything here is bounded by the budget
(resident pages, visible bookmarks, cluster roots, a capped statistics table),
never by the length of the thread; page content lives in the store.

The channel value is a plain JSON-safe dict (`PagingState.to_value`; keys at their default are
left out, so read it with `PagingState.from_value`), merged by
`paging_reducer`: a paging step writes a whole new state, a `recall` writes a
small delta (accessed pages), so parallel recalls never lose a count.

Example:
    >>> state = PagingState()
    >>> state.allocate("p", 3), state.allocate("p", 1, floor=10)
    ([1, 2, 3], [10])
    >>> state.owns("p", 2), state.owns("p", 5), state.owns("p", 10)
    (True, False, True)
    >>> value = paging_reducer(state.to_value(), recall_delta(["p2", "p2"], turn=4))
    >>> PagingState.from_value(value).stats["p2"]
    [2, 4]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Annotated, Any, Literal

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

from langmem_paging.core.sketch import MAX_TERMS, TermSketch, add_terms, grouped, ungrouped

__all__ = [
    "MAX_TERMS",
    "STATE_KEY",
    "ClusterEntry",
    "PagingState",
    "ResidentPage",
    "ShownPage",
    "TermSketch",
    "compact_terms",
    "paging_reducer",
    "recall_delta",
]

STATE_KEY = "paging"
"""The graph state key holding the paging state."""

STATE_VERSION = 3
READABLE_VERSIONS = (2, 3)
"""Channel values `from_value` reads: version 2 wrote every key; version 3 leaves out the keys at
their default value and the bookmarks the view shows."""
MAX_STATS = 256
"""Access statistics kept for pages that are neither resident nor shown (most recent first)."""

Kind = Literal["p", "c"]


@dataclass
class ResidentPage:
    """A formed page whose messages are still in the context (the hot tier)."""

    ids: list[str]
    """Ids of its messages, in order."""
    order: int
    """Ordinal of its first message in the thread's history."""
    tokens: int
    """Tokens of its messages as last counted."""
    turn: int
    """User turn in which it was formed."""
    last: int
    """User turn of its latest use (formation or recall)."""
    count: int = 0
    """Recalls of this page."""
    bookmark: str = ""
    """Its bookmark, made when it formed, shown once it is evicted."""
    digest: str = ""
    """Digest of its messages when stored at formation (a change means it must be stored again)."""
    terms: dict[str, float] = field(default_factory=dict)
    """Its strongest terms with weights, for clustering once evicted."""
    features: dict[str, Any] = field(default_factory=dict)
    """Per-page features policies computed at formation; checkpointed while resident, so keep
    them small (encode vectors compactly)."""


@dataclass
class ShownPage:
    """An evicted page shown in the context by a short message: its bookmark (cold) or digest (warm)."""

    anchor: str
    """Id of the message that shows it (the id of the page's first message)."""
    tokens: int
    """Tokens of that message."""
    page_tokens: int
    """Tokens of the page itself."""
    turn: int
    """User turn in which the page was formed."""
    last: int
    """User turn of its latest use."""
    count: int = 0
    """Recalls of this page."""
    terms: dict[str, float] = field(default_factory=dict)
    """Its strongest terms with weights, for clustering: empty until a step that needs them reads them
    (`langmem_paging.step.io.LoadTerms`); with a store, never checkpointed (see `PagingState.terms_stored`)."""
    tier: Literal["cold", "warm"] = "cold"
    """``cold``: a keyword bookmark; ``warm``: a digest of its key lines."""
    bookmark: str = ""
    """Its keyword bookmark. Checkpointed only while the page is warm: a cold page's bookmark is the
    text of the message at `anchor` (the view holds it), read back when the page turns warm."""
    weight: float = 1.0
    """Explicit importance marker of its messages (tier scoring)."""


@dataclass
class ClusterEntry:
    """A cluster root shown in the context by one cluster bookmark."""

    anchor: str
    """Id of the message that shows it (where its first member page was)."""
    tokens: int
    """Tokens of that message."""
    size: int
    """Member pages."""
    first: int
    """Lowest member page number."""
    last: int
    """Highest member page number."""
    text: str = ""
    """The cluster bookmark, as the step that made it rendered it; never checkpointed (the message
    at `anchor` shows it, the cluster node in the store holds it)."""
    terms: dict[str, float] = field(default_factory=dict)
    """Weighted terms summarizing the members: empty until a step that needs them reads them
    (`langmem_paging.step.io.LoadTerms`); with a store, never checkpointed (see `PagingState.terms_stored`)."""


@dataclass
class PagingState:
    """One branch's paging state (see the module docstring)."""

    turn: int = 0
    """User turns seen: the clock of LRU and LFU."""
    last_user: str | None = None
    """Id of the newest user message seen, to advance `turn` once per user turn."""
    next: dict[str, int] = field(default_factory=lambda: {"p": 1, "c": 1})
    """Next page and cluster numbers on this branch."""
    spans: dict[str, list[list[int]]] = field(default_factory=lambda: {"p": [], "c": []})
    """Number ranges ``[start, stop)`` this branch allocated: a page or cluster exists on
    this branch only if its number is in one. A range opens at each fork."""
    pages: dict[str, ResidentPage] = field(default_factory=dict)
    """Formed pages still resident, by page id."""
    shown: dict[str, ShownPage] = field(default_factory=dict)
    """Evicted pages shown by a bookmark or digest, by page id."""
    clusters: dict[str, ClusterEntry] = field(default_factory=dict)
    """Cluster roots shown by a cluster bookmark, by cluster id."""
    stats: dict[str, list[int]] = field(default_factory=dict)
    """``[access_count, last_access]`` of other evicted pages that were recalled (capped)."""
    order: dict[str, int] = field(default_factory=dict)
    """History ordinal of each resident message no page holds yet (pages keep their own)."""
    next_order: int = 0
    """The next history ordinal."""
    low_order: int = 0
    """The lowest history ordinal given (messages a rewrite put before all the context's older
    messages, such as a summary, are numbered below it)."""
    sketch: dict[str, str] = field(default_factory=dict, repr=False)
    """The pure `page_messages` only (no store), or a checkpoint written before the sketch moved to
    the store: `doc_freq` as the checkpoint holds it (``{count: "term term ..."}``) while no one read
    it. A step that forms no page neither parses nor regroups it, it passes this value on; with a
    store, the first step that forms a page moves it to the store (`langmem_paging.core.sketch`)."""
    n_pages: int = 0
    """Pages `sketch` counted (the IDF's document count; the pure path only)."""
    skeleton: list[Any] | None = None
    """View mode only: the paged view as ``[key, index]`` of history messages and message dicts
    (the library's own)."""
    seen: str | None = None
    """View mode only: key of the newest history message the last step saw."""
    seen_index: int = -1
    """View mode only: its index in the history."""
    head: str | None = None
    """View mode only: key of the history's first message at the last step (another first
    message the skeleton does not know means the history was rewritten)."""
    front: list[str] = field(default_factory=list)
    """View mode only: keys of the history's next messages after `head` (up to `FRONT` of them): a
    first message among them means the app removed messages from the front, not a rewrite."""
    warned: bool = False
    """The over-budget warning was given on this branch."""
    tokens: int = 0
    """Tokens of the view the last step produced."""
    budget: int = 0
    """The message budget the last step used (max_tokens minus prompt and tools)."""
    protected: int = 0
    """Tokens of the last step's view that nothing may evict (sizes recall results)."""
    encoding: str | None = None
    """The tiktoken encoding the last step counted with (the model's, which a recall on this
    branch counts with too: the tool is not told the model)."""
    recalled: list[str] = field(default_factory=list)
    """Ids of recall results the last recall added; the next step keeps them resident."""
    touched: list[str] = field(default_factory=list)
    """Pages recalled since the last step, whose statistics the next step mirrors to the store."""
    lifecycle: str | None = None
    """The thread's lifecycle generation in the store when this state was built (a forget writes a
    new one): a step finding another in the store rebuilds what this state shows from the records
    (`langmem_paging.runtime.lifecycle_step.follow_lifecycle`)."""

    pending_sketch: TermSketch | None = field(default=None, repr=False, compare=False)
    """The thread's sketch after this step counted its new pages (`keep_sketch`); never
    checkpointed: with a store, `Commit` writes it with the pages."""

    terms_stored: bool = field(default=False, repr=False, compare=False)
    """The page and cluster records in a store hold the shown and cluster entries' terms, so
    `to_value` leaves them out (set by the store's commit): the checkpoint, written at every step,
    stays small; a step that needs them reads them back (`langmem_paging.step.io.LoadTerms`). Without
    a store (the pure `page_messages`), they stay in the state."""

    _doc_freq: dict[str, int] | None = field(default=None, repr=False, compare=False)

    @property
    def doc_freq(self) -> dict[str, int]:
        """The sketch this state carries (the pure path, or an old checkpoint; empty with a store),
        parsed from `sketch` on first use (the caller may change it: it is regrouped at `to_value`)."""
        if self._doc_freq is None:
            self._doc_freq = ungrouped(self.sketch)
        return self._doc_freq

    @doc_freq.setter
    def doc_freq(self, value: dict[str, int]) -> None:
        self._doc_freq = value

    # -- ids ----------------------------------------------------------------------
    def allocate(self, kind: Kind, n: int, *, floor: int = 0) -> list[int]:
        """Take `n` numbers, starting no lower than `floor` (a fork opens a new span)."""
        if n <= 0:
            return []
        start = max(self.next[kind], floor)
        spans = self.spans[kind]
        if spans and spans[-1][1] == start:
            spans[-1][1] = start + n
        else:
            spans.append([start, start + n])
        self.next[kind] = start + n
        return list(range(start, start + n))

    def owns(self, kind: Kind, number: int) -> bool:
        """True if this branch allocated `number` (so its page or cluster exists here)."""
        return any(a <= number < b for a, b in self.spans[kind])

    # -- statistics -----------------------------------------------------------------
    def count_terms(self, terms: Iterable[str]) -> None:
        """Add one page's distinct terms to the sketch this state carries (`add_terms`)."""
        self.n_pages += 1
        add_terms(self.doc_freq, terms)

    def keep_sketch(self, sketch: TermSketch) -> None:
        """Hold the thread's sketch after a step counted its pages: in the state when it is
        `checkpointed` (no store); otherwise for `Commit` only, and the state drops the sketch an
        old checkpoint carried (the store holds it from now on)."""
        self.pending_sketch = sketch
        if sketch.checkpointed:
            self._doc_freq, self.n_pages = sketch.doc_freq, sketch.n_pages
        else:
            self._doc_freq, self.sketch, self.n_pages = None, {}, 0

    def carried_sketch(self) -> TermSketch:
        """The sketch this state carries, as a `TermSketch` the caller may change (a copy)."""
        return TermSketch(dict(self.doc_freq), self.n_pages)

    def access(self, page_id: str) -> tuple[int, int]:
        """``(access_count, last_access)`` of a page, wherever its statistics live."""
        if page_id in self.pages:
            p = self.pages[page_id]
            return p.count, p.last
        if page_id in self.shown:
            s = self.shown[page_id]
            return s.count, s.last
        count, last = self.stats.get(page_id, (0, 0))
        return count, last

    def record_access(self, page_id: str, times: int, turn: int) -> None:
        """Count `times` recalls of a page at `turn`."""
        if page_id not in self.touched:
            self.touched.append(page_id)
        target = self.pages.get(page_id) or self.shown.get(page_id)
        if target is not None:
            target.count += times
            target.last = max(target.last, turn)
            return
        count, last = self.stats.pop(page_id, (0, 0))
        self.stats[page_id] = [count + times, max(last, turn)]
        while len(self.stats) > MAX_STATS:
            self.stats.pop(next(iter(self.stats)))

    # -- (de)serialization ----------------------------------------------------------------
    def to_value(self) -> dict[str, Any]:
        """The JSON-safe channel value. It is written at every step, so it carries what decides the
        view and nothing the view or the store already holds: keys at their default value are left
        out (`from_value` fills them in), and so are the entries' bookmark texts (see `ShownPage.bookmark`,
        `ClusterEntry.text`) and, with a store, their terms."""
        value = self._full_value()
        return {k: v for k, v in value.items() if k in _ALWAYS_KEYS or v != _DEFAULT_VALUE.get(k, _ALWAYS)}

    def _full_value(self) -> dict[str, Any]:
        """Every key of the channel value (`to_value` leaves out those at their default)."""
        return {
            "kind": "state",
            "v": STATE_VERSION,
            "turn": self.turn,
            "last_user": self.last_user,
            "next": dict(self.next),
            "spans": {k: [list(s) for s in v] for k, v in self.spans.items()},
            "pages": {k: _fields(v) for k, v in self.pages.items()},
            "shown": {k: _fields(v, terms=not self.terms_stored) for k, v in self.shown.items()},
            "clusters": {k: _fields(v, terms=not self.terms_stored) for k, v in self.clusters.items()},
            "stats": {k: list(v) for k, v in self.stats.items()},
            "order": dict(self.order),
            "next_order": self.next_order,
            "low_order": self.low_order,
            "skeleton": self.skeleton,
            "seen": self.seen,
            "seen_index": self.seen_index,
            "head": self.head,
            "front": list(self.front),
            "warned": self.warned,
            "tokens": self.tokens,
            "budget": self.budget,
            "protected": self.protected,
            "encoding": self.encoding,
            "recalled": list(self.recalled),
            "touched": list(self.touched),
            "lifecycle": self.lifecycle,
            **self._sketch_value(),
        }

    def _sketch_value(self) -> dict[str, Any]:
        """The carried sketch's keys of the channel value: none when it carries none (with a store)."""
        sketch = self.sketch if self._doc_freq is None else grouped(self._doc_freq)
        if not sketch and not self.n_pages:
            return {}
        return {"doc_freq": sketch, "n_pages": self.n_pages}

    @classmethod
    def from_value(cls, value: dict[str, Any] | PagingState | None) -> PagingState:
        """Parse a channel value (None or ``{}`` for a new thread); the value is not mutated."""
        if isinstance(value, PagingState):
            value = value.to_value()
        if not value or value.get("kind") != "state":
            return cls()
        if value.get("v") not in READABLE_VERSIONS:
            raise ValueError(
                f"Paging state version {value.get('v')!r} is not supported by this version of "
                f"langmem-paging (reads {', '.join(map(str, READABLE_VERSIONS))}); start a new thread "
                "or upgrade langmem-paging."
            )
        value = {**_DEFAULT_VALUE, **value}
        return cls(
            turn=value["turn"],
            last_user=value["last_user"],
            next=dict(value["next"]),
            spans={k: [list(s) for s in v] for k, v in value["spans"].items()},
            pages={k: _resident(v) for k, v in value["pages"].items()},
            shown={
                k: ShownPage(**{**v, "terms": _Compact(v.get("terms", {}))})
                for k, v in value["shown"].items()
            },
            clusters={
                k: ClusterEntry(**{**v, "terms": _Compact(v.get("terms", {}))})
                for k, v in value["clusters"].items()
            },
            stats={k: list(v) for k, v in value["stats"].items()},
            order=dict(value["order"]),
            next_order=value["next_order"],
            low_order=value["low_order"],
            sketch=_as_grouped(value.get("doc_freq", {})),
            n_pages=value.get("n_pages", 0),
            skeleton=list(value["skeleton"]) if value["skeleton"] is not None else None,
            seen=value["seen"],
            seen_index=value["seen_index"],
            head=value["head"],
            front=list(value["front"]),
            warned=value["warned"],
            tokens=value["tokens"],
            budget=value["budget"],
            protected=value["protected"],
            encoding=value["encoding"],
            recalled=list(value["recalled"]),
            touched=list(value["touched"]),
            lifecycle=value["lifecycle"],
        )


TERMS_STORED = 12
"""Term weights an entry keeps in the checkpoint (its best), rounded to `WEIGHT_DIGITS`: the state is
written at every step, so it stays smaller than the messages it manages."""
WEIGHT_DIGITS = 3


def _as_grouped(value: dict[str, Any]) -> dict[str, str]:
    """The sketch of a channel value in the grouped form (the value is shared, never changed: a
    changed sketch is a new dict)."""
    if all(isinstance(v, str) for v in value.values()):
        return value
    return grouped(ungrouped(value))


def _resident(value: dict[str, Any]) -> ResidentPage:
    return ResidentPage(
        **{
            **value,
            "ids": list(value["ids"]),
            "terms": _Compact(value.get("terms", {})),
            "features": dict(value.get("features", {})),
        }
    )


def _fields(obj: ResidentPage | ShownPage | ClusterEntry, *, terms: bool = True) -> dict[str, Any]:
    """A shallow dict of an entry (cheaper than `dataclasses.asdict`, which deep-copies) as the
    checkpoint holds it: fields at their default value left out, and the bookmark text the view
    shows (a cluster's; a cold page's: a warm page shows its digest, so its bookmark travels with it
    for when it turns cold again); its term weights trimmed and rounded, or left out when `terms` is
    false or there are none (an entry whose terms no step read back, on a branch a recall delta
    rewrote)."""
    out = {
        name: value for name, default in _ENTRY_FIELDS[type(obj)] if (value := getattr(obj, name)) != default
    }
    if isinstance(obj, ClusterEntry):
        out.pop("text", None)
    elif isinstance(obj, ShownPage) and obj.tier == "cold":
        out.pop("bookmark", None)
    if "terms" in out:
        if terms:
            out["terms"] = compact_terms(out["terms"])
        else:
            del out["terms"]
    return out


def _entry_fields(cls: type[DataclassInstance]) -> list[tuple[str, Any]]:
    """An entry class's fields with their defaults (`_ALWAYS` for those with none)."""
    out: list[tuple[str, Any]] = []
    for f in fields(cls):
        if f.default is not MISSING:
            out.append((f.name, f.default))
        elif f.default_factory is not MISSING:
            out.append((f.name, f.default_factory()))
        else:
            out.append((f.name, _ALWAYS))
    return out


_ALWAYS: Any = object()
"""No default: a key or field compared with it is always written."""
_ENTRY_FIELDS: dict[type[DataclassInstance], list[tuple[str, Any]]] = {
    cls: _entry_fields(cls) for cls in (ResidentPage, ShownPage, ClusterEntry)
}


class _Compact(dict[str, float]):
    """Term weights read from a channel value, so already trimmed and rounded: `to_value` copies
    them instead of sorting and rounding them again at every step (no one changes a `terms` dict in
    place: a changed entry gets a new plain dict, compacted at the next `to_value`)."""


def compact_terms(terms: Mapping[str, float]) -> dict[str, float]:
    """The term weights an entry keeps (`TERMS_STORED`, rounded): what it is checkpointed with, and what
    terms read back from a record are cut to, so a fold decides as it did from the checkpoint."""
    if type(terms) is _Compact:
        return dict(terms)
    best = sorted(terms.items(), key=lambda kv: (-kv[1], kv[0]))[:TERMS_STORED]
    return {term: round(weight, WEIGHT_DIGITS) for term, weight in best}


def recall_delta(page_ids: Iterable[str], *, turn: int, results: Iterable[str] = ()) -> dict[str, Any]:
    """The update a `recall` writes: one access per page id listed (repeats count), and the
    ids of the messages to keep resident at the next step (the recall results, and turns in the
    context the search ranked)."""
    return {"kind": "recall", "accessed": list(page_ids), "turn": turn, "results": list(results)}


def paging_reducer(current: dict[str, Any] | None, update: dict[str, Any] | None) -> dict[str, Any]:
    """Merge a paging update into the channel value.

    A whole state (``kind == "state"``) replaces the value; a recall delta is applied to
    it, so parallel recalls in one step all count.
    """
    if not update:
        return current or {}
    if update.get("kind") == "state":
        return update
    if update.get("kind") != "recall":
        raise ValueError(f"Unknown paging update {update.get('kind')!r}.")
    state = PagingState.from_value(current)
    for page_id in update["accessed"]:
        state.record_access(page_id, 1, update["turn"])
    state.recalled = [*state.recalled, *update.get("results", [])]
    return state.to_value()


_ALWAYS_KEYS = frozenset({"kind", "v", "pages", "shown", "clusters"})
"""Keys of the channel value written whatever their value (the entry tables, which readers of the
raw value index)."""
_DEFAULT_VALUE: dict[str, Any] = {
    k: v for k, v in PagingState()._full_value().items() if k not in _ALWAYS_KEYS
}
"""The channel value's other keys at their defaults: left out of a value, filled in by `from_value`."""

PagingChannel = Annotated[dict, paging_reducer]
"""Type of the ``paging`` key in a graph state: ``paging: NotRequired[PagingChannel]``."""
