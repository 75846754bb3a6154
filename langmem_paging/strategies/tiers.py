"""Tiers: hot (resident), warm (a digest of the page), cold (its bookmark), then clusters.

With ``tiers=`` set, a score per page decides what leaves the hot tier (the lowest first,
instead of the eviction policy) and which evicted pages stay warm: shown as a short
digest of their key lines rather than a keyword bookmark, within `warm_tokens`. The page
stays whole in the store behind its digest, and `recall` returns it. Scores move as the
conversation does (recalls, recency, the topic), so pages are promoted to warm and
demoted to cold from step to step; cold bookmarks fold into clusters as usual.

Two scorings from the research this follows:

- `TierScoring`: importance = w_rec*recency + w_acc*access + w_sem*similarity to the recent
  context + w_ent*entity importance + w_uniq*uniqueness, times an explicit importance marker
  (``additional_kwargs={"langmem_paging": {"importance": 3.0}}`` on a message of the page).
- `UtilityScoring`: u = alpha*log(f + 1) + beta*exp(-dt/tau) (f = recalls, dt = turns since the
  last use), pruned greedily by the lowest u/c (c = token cost).

Example:
    >>> from langmem_paging.strategies.tiers import UtilityScoring, TierItem
    >>> items = [TierItem("p1", tokens=100, created_turn=1, last_access=1, access_count=0),
    ...          TierItem("p2", tokens=100, created_turn=2, last_access=9, access_count=3)]
    >>> scores = UtilityScoring(tau=5).scores(items, turn=10, recent_terms=[])
    >>> scores["p2"] > scores["p1"]
    True
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from langchain_core.messages import BaseMessage

from langmem_paging.core.background import stem
from langmem_paging.core.messages import library_mark, speaker
from langmem_paging.core.text import cosine, search_terms
from langmem_paging.core.tokens import message_text
from langmem_paging.strategies.policy import Candidate, EvictionPolicy, PolicyContext

__all__ = [
    "TIER_MODES",
    "TierItem",
    "TierMode",
    "TierPolicy",
    "TierScoring",
    "UtilityScoring",
    "extractive_digest",
    "get_tiers",
    "importance",
]

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass
class TierItem:
    """A page as the tier scoring sees it."""

    id: str
    """Page id."""
    tokens: int
    """Its cost: the page's tokens when hot, its digest's when warm."""
    created_turn: int
    """User turn in which it formed."""
    last_access: int
    """User turn of its latest use (formation or recall)."""
    access_count: int
    """Recalls."""
    terms: Mapping[str, float] = field(default_factory=dict)
    """Its strongest terms (surface forms) with weights."""
    weight: float = 1.0
    """Explicit importance marker (1.0 unless a message sets one)."""


def _unit_stems(terms: Mapping[str, float]) -> dict[str, float]:
    out: dict[str, float] = {}
    for term, w in terms.items():
        key = term.lower() if term[:1].isdigit() else stem(term.lower())
        out[key] = out.get(key, 0.0) + w
    norm = math.sqrt(sum(w * w for w in out.values())) or 1.0
    return {k: w / norm for k, w in out.items()}


def _bounded(
    default: float | None, *, low: float = 0.0, high: float | None = None, above: bool = False
) -> Any:
    """A numeric field of a tier mode and its range (`low` <= value, or < with `above`; at most
    `high`): `TierMode.__post_init__` refuses a value outside it, naming the field."""
    return field(default=default, metadata={"range": (low, above, high)})


def _size(default: float | None) -> Any:
    """A tier size: tokens as an int >= 0, or a share of the budget as a float in [0, 1]."""
    return field(default=default, metadata={"size": True})


def _out_of_range(value: Any, low: float, above: bool, high: float | None) -> str | None:
    """Why `value` is not a number in the range, or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return "must be a number"
    if value < low or (above and value == low):
        return f"must be {'>' if above else '>='} {low:g}"
    return f"must be at most {high:g}" if high is not None and value > high else None


@dataclass
class TierMode(ABC):
    """A tier scoring: scores pages; sizes the hot and warm tiers (tokens as an int, or a share of
    the budget as a float); `digest_ratio` is a digest's length against its page's (0.25: 4:1).

    Raises:
        ValueError: At construction, for a weight, size or ratio out of its range, naming it.
    """

    hot_tokens: int | float | None = _size(None)
    """Resident pages' budget (None: what the overall budget leaves)."""
    warm_tokens: int | float = _size(0.15)
    """Warm digests' budget."""
    digest_ratio: float = _bounded(0.25, above=True, high=1.0)
    """A digest's length as a share of its page's."""
    digester: Any = None
    """Writes digests instead of the extractive default, e.g. `langmem_paging.strategies.llm.LLMDigester`."""

    name = "tiers"
    uses_recent_terms: ClassVar[bool] = True
    """Whether `scores` reads its `recent_terms` (see `recent_terms`)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if "range" in f.metadata:
                problem = _out_of_range(value, *f.metadata["range"])
            elif "size" in f.metadata and value is not None:
                share = isinstance(value, float)
                problem = _out_of_range(value, 0.0, False, 1.0 if share else None)
                if problem and not share:
                    problem += " (tokens as an int, or a share of the budget as a float in [0, 1])"
            else:
                continue
            if problem:
                raise ValueError(f"{type(self).__name__}: `{f.name}` {problem}; got {value!r}.")

    def recent_terms(self, recent_text: Callable[[], str]) -> list[str]:
        """The `recent_terms` to score with: the recent text's search terms, or none for a mode
        that never reads them (stemming the recent text was a fifth of a quiet call with utility
        tiers; `recent_text` is only called when they are read)."""
        return search_terms(recent_text()) if self.uses_recent_terms else []

    @abstractmethod
    def scores(
        self, items: Sequence[TierItem], *, turn: int, recent_terms: Sequence[str]
    ) -> dict[str, float]:
        """A score per page: higher stays hotter."""

    def rank_key(self, item: TierItem, score: float) -> float:
        """What eviction minimizes and the warm tier maximizes (the score itself by default)."""
        return score

    def warm_budget(self, max_tokens: int) -> int:
        """Tokens warm digests may take."""
        return (
            int(self.warm_tokens * max_tokens)
            if isinstance(self.warm_tokens, float)
            else int(self.warm_tokens)
        )

    def hot_budget(self, max_tokens: int) -> int | None:
        """Tokens resident pages may take (None: only the overall budget bounds them)."""
        if self.hot_tokens is None:
            return None
        return (
            int(self.hot_tokens * max_tokens) if isinstance(self.hot_tokens, float) else int(self.hot_tokens)
        )


@dataclass
class TierScoring(TierMode):
    """Importance scoring: weights of recency, recalls, similarity to the recent context, named
    entities, uniqueness; times an explicit marker. Tier sizes as in `TierMode`."""

    w_rec: float = _bounded(1.0)
    """Weight of recency (the newest use scores 1, the oldest 0)."""
    w_acc: float = _bounded(1.0)
    """Weight of recalls (log-scaled against the most recalled page)."""
    w_sem: float = _bounded(1.0)
    """Weight of similarity to the recent context (cosine of stemmed terms)."""
    w_ent: float = _bounded(0.5)
    """Weight of entity importance (the share of names, numbers and dates among its terms)."""
    w_uniq: float = _bounded(0.5)
    """Weight of uniqueness (1 - its greatest similarity to another page)."""

    name = "importance"

    def scores(
        self, items: Sequence[TierItem], *, turn: int, recent_terms: Sequence[str]
    ) -> dict[str, float]:
        if not items:
            return {}
        vectors = {i.id: _unit_stems(i.terms) for i in items}
        recent = Counter(recent_terms)
        norm = math.sqrt(sum(c * c for c in recent.values())) or 1.0
        recent_vec = {t: c / norm for t, c in recent.items()}
        span = max(1, turn - min(i.last_access for i in items))
        most = max(i.access_count for i in items)
        out = {}
        for item in items:
            others = [cosine(vectors[item.id], vectors[o.id]) for o in items if o.id != item.id]
            base = (
                self.w_rec * (1 - (turn - item.last_access) / span)
                + self.w_acc * (math.log1p(item.access_count) / math.log1p(most) if most else 0.0)
                + self.w_sem * (cosine(vectors[item.id], recent_vec) if recent_vec else 0.0)
                + self.w_ent * _entity_share(item.terms)
                + self.w_uniq * (1 - max(others, default=0.0))
            )
            out[item.id] = base * item.weight
        return out


def _entity_share(terms: Mapping[str, float]) -> float:
    """The share of names, numbers and dates among a page's terms."""
    named = [t for t in terms if t[:1].isupper() or t[:1].isdigit()]
    return len(named) / len(terms) if terms else 0.0


@dataclass
class UtilityScoring(TierMode):
    """Streaming-memory utility u = alpha*log(f + 1) + beta*exp(-dt/tau); pages are pruned
    greedily by the lowest u/c (c = token cost). Tier sizes as in `TierMode`."""

    alpha: float = _bounded(0.6)
    """Weight of recalls."""
    beta: float = _bounded(0.4)
    """Weight of recency."""
    tau: float = _bounded(10.0, above=True)
    """Recency time constant, in user turns."""

    name = "utility"
    uses_recent_terms: ClassVar[bool] = False

    def scores(
        self, items: Sequence[TierItem], *, turn: int, recent_terms: Sequence[str]
    ) -> dict[str, float]:
        return {
            i.id: (
                self.alpha * math.log(i.access_count + 1)
                + self.beta * math.exp(-max(0, turn - i.last_access) / self.tau)
            )
            * i.weight
            for i in items
        }

    def rank_key(self, item: TierItem, score: float) -> float:
        return score / max(1, item.tokens)


TIER_MODES: dict[str, type[TierMode]] = {"importance": TierScoring, "utility": UtilityScoring}


def get_tiers(value: TierMode | str | None) -> TierMode | None:
    """A tier mode from one, or from its name (``"importance"``, ``"utility"``)."""
    if value is None or isinstance(value, TierMode):
        return value
    if isinstance(value, str) and value in TIER_MODES:
        return TIER_MODES[value]()
    available = ", ".join(repr(n) for n in TIER_MODES)
    raise ValueError(
        f"Unknown tiers {value!r}. Available: {available}, or TierScoring(...)/UtilityScoring(...)."
    )


def extractive_digest(
    messages: Sequence[BaseMessage],
    terms: Mapping[str, float],
    *,
    max_tokens: int,
    count_text: Callable[[str], int],
) -> str:
    """The page's key sentences, in order, within `max_tokens`: sentences are scored by the
    weights of the page's strongest terms they contain (per word, so long ones do not win by
    length), and each keeps its speaker."""
    weights: dict[str, float] = {}
    for term, w in terms.items():
        key = term.lower() if term[:1].isdigit() else stem(term.lower())
        weights[key] = max(weights.get(key, 0.0), w)
    sentences = []
    for index, message in enumerate(messages):
        for part in _SENTENCE.split(message_text(message).strip()):
            part = " ".join(part.split())
            if not part:
                continue
            found = search_terms(part)
            score = sum(weights.get(t, 0.0) for t in set(found)) / math.sqrt(len(found) + 1)
            sentences.append((score, index, part, speaker(message)))
    chosen: list[tuple[int, int, str]] = []
    used = 0
    for score, index, text, who in sorted(sentences, key=lambda s: (-s[0], s[1])):
        line = f"{who}: {text}"
        cost = count_text(line) + 1
        if score <= 0 or used + cost > max_tokens:
            continue
        chosen.append((index, len(chosen), line))
        used += cost
    return "\n".join(line for _, _, line in sorted(chosen))


def importance(messages: Iterable[BaseMessage]) -> float:
    """The strongest explicit importance marker among messages (1.0 when none sets one):
    ``additional_kwargs={"langmem_paging": {"importance": 3.0}}``."""
    weights = [library_mark(m).get("importance") for m in messages]
    return max([float(w) for w in weights if isinstance(w, (int, float))], default=1.0)


class TierPolicy(EvictionPolicy):
    """Tier scoring as an eviction policy: the resident page (or recall copy) the tier mode ranks
    lowest leaves first, and resident pages are kept within the mode's hot tier.

    Example:
        >>> policy = TierPolicy(UtilityScoring(tau=5, hot_tokens=100))
        >>> old = Candidate("p1", "page", ("p1",), 0, 60, 1, 1, 0)
        >>> recalled = Candidate("p2", "page", ("p2",), 1, 60, 2, 9, 3)
        >>> policy.victim([old, recalled], PolicyContext(turn=10, recent_text="")).key, policy.resident_limit(4000)
        ('p1', 100)
    """

    name = "tiers"

    def __init__(self, tiers: TierMode) -> None:
        self.tiers = tiers

    def __repr__(self) -> str:
        return f"TierPolicy({self.tiers!r})"

    def victim(self, candidates: Sequence[Candidate], context: PolicyContext) -> Candidate:
        items = [
            TierItem(
                c.key,
                c.tokens,
                c.created_turn,
                c.last_access,
                c.access_count,
                c.terms,
                importance(c.messages),
            )
            for c in candidates
        ]
        recent = self.tiers.recent_terms(lambda: context.recent_text)
        scores = self.tiers.scores(items, turn=context.turn, recent_terms=recent)
        ranked = zip(candidates, items, strict=True)
        return min(ranked, key=lambda ci: (self.tiers.rank_key(ci[1], scores[ci[0].key]), ci[0].position))[0]

    def resident_limit(self, budget: int) -> int | None:
        return self.tiers.hot_budget(budget)
