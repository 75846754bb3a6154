"""STAE, semantic-temporal aware eviction: evict what is redundant and old, group by group.

Every candidate (a resident page, or a recall copy) has a vector (`PageVectors`: one
embedding per page, made when the page forms). Within a group G of candidates:

- Redundancy R(m) in [0, 1]. ``"knn"`` (default, density): rho(m) = (1/k) * sum over the
  k nearest neighbours j of m in G of exp(-||v_m - v_j||^2 / (2 h^2)), min-max normalized
  in G, R = rho_norm. ``"centroid"``: D(m) = ||v_m - c_G|| with c_G the re-normalized
  centroid of G, min-max normalized, R = 1 - D_norm. A group of one, or one where every
  value is equal, has R = 0 throughout: nothing in it is more redundant than the rest.
- Recency T(m) in [0, 1]: age rank in G, 1 for the oldest (lowest position, as FIFO
  sees it), 0 for the newest; a group of one has T = 1.
- Score S(m) = beta * R(m) + (1 - beta) * T(m). Regular STAE evicts the highest S first
  (beta = 0 is FIFO, beta = 1 pure redundancy); ``inverted=True`` evicts the lowest S first.

Groups: ``"global"`` (all candidates), ``"kmeans"`` (clusters of the vectors, k by
silhouette in [2, 25] unless `n_groups` is given), ``"temporal"`` (`n_groups` equal
chunks in age order, 4 by default). Evictions are shared among groups in proportion to
their sizes: the paging step asks for one victim at a time and lists the ones already
chosen in `PolicyContext.evicted`, so each call counts the step's evictions per group
(no state is kept between calls) and takes the group furthest below its share, then
the best-scoring candidate in it. Scores are recomputed over the group's remaining
candidates at each call: once two near-duplicates are down to one, the survivor is no
longer redundant.

Cost per call is bounded by what is resident, never by history: vectors are decoded,
not re-embedded; the pairwise distances and the grouping of a candidate set are cached
(small LRU keyed by the set's keys, positions and vectors), so a step evicting several
pages clusters once (again only if the step forms more pages, or a recall copy leaves
with its page); later calls recompute R and T of one group. The silhouette search runs
k-means (4 restarts) for every k in [2, 25], the step's dominant cost: see
``tools/bench_stae.py`` for timings at 20, 50 and 100 resident pages.

Example:
    Three pages about the same bees and two unlike anything else; one user turn per page
    and ``token_counter=len`` (one message, one token) keep the budget easy to follow:

    >>> from langchain_core.messages import AIMessage, HumanMessage
    >>> from langmem_paging import page_messages
    >>> chat = []
    >>> for i, text in enumerate(["My bees in Bled swarmed.", "I sold my old bicycle.",
    ...                           "The bees in Bled swarmed again.", "Bees swarmed in Bled today.",
    ...                           "Our tax return is due."]):
    ...     chat += [HumanMessage(text, id=f"h{i}"), AIMessage("Noted.", id=f"a{i}")]
    >>> chat.append(HumanMessage("What next?", id="h5"))
    >>> def evicted(policy):
    ...     return page_messages(chat, max_tokens=10, low_water_tokens=9, boundary="fixed_2",
    ...                          token_counter=len, bookmark_share=1.0, policy=policy).evicted
    >>> evicted("fifo"), evicted(STAEPolicy(beta=1.0)), evicted(STAEPolicy(beta=1.0, inverted=True))
    (['p1', 'p2'], ['p1', 'p3'], ['p5', 'p2'])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from langchain_core.messages import BaseMessage

from langmem_paging.core.lru import LRU
from langmem_paging.strategies.embeddings import Embedder
from langmem_paging.strategies.kmeans import choose_k, kmeans, pairwise_sq_distances
from langmem_paging.strategies.policy import Candidate, EvictionPolicy, PolicyContext
from langmem_paging.strategies.vectors import PageVectors

__all__ = ["GROUPINGS", "REDUNDANCIES", "STAEPolicy"]

REDUNDANCIES = ("knn", "centroid")
"""Redundancy measures."""
GROUPINGS = ("global", "kmeans", "temporal")
"""How candidates are grouped before scoring."""

_TEMPORAL_GROUPS = 4
_SILHOUETTE_K = (2, 25)
_DIGITS = 9  # scores are compared rounded, so float noise never decides a tie


@dataclass(frozen=True)
class _Layout:
    """A candidate set prepared for scoring: vectors, distances, groups (cached per set)."""

    keys: tuple[str, ...]
    """Candidate keys in age order (position)."""
    positions: np.ndarray
    """Their positions."""
    vectors: np.ndarray
    """Their vectors, one row each."""
    sq_distances: np.ndarray
    """Pairwise squared distances."""
    groups: tuple[np.ndarray, ...]
    """Indices (into `keys`) of each group's members."""
    group_of: dict[str, int]
    """Group of each key."""


class STAEPolicy(EvictionPolicy):
    """Evict the most redundant, oldest candidate (highest S = beta*R + (1-beta)*T), group by group.

    Args:
        beta: Weight of redundancy against age, in [0, 1]; 0 is FIFO, 1 pure redundancy.
        redundancy: ``"knn"`` (kernel density over the `k` nearest neighbours) or
            ``"centroid"`` (closeness to the group's centroid).
        k: Neighbours in the density.
        h: Kernel bandwidth; None: per group, the median of its pairwise distances (the
            median heuristic), or of the non-zero ones when most pairs coincide.
        grouping: ``"global"``, ``"kmeans"`` or ``"temporal"``.
        n_groups: kmeans: fixed number of clusters (None: chosen by silhouette in [2, 25]);
            temporal: number of age chunks (None: 4). Always capped by the number of
            candidates. Not allowed with ``"global"``.
        inverted: Evict the lowest S first instead.
        unit: ``"page"``: one vector per page; ``"exchange"``: a page's vector is the mean
            of its user-assistant exchanges' vectors.
        embedder: An `Embedder` or a spec for `get_embedder` (None: `HashingEmbedder`).
        seed: Seed of k-means (the policy is deterministic for a given seed).

    Raises:
        ValueError: If an option is out of range or unknown (the message names it).

    Example:
        >>> policy = STAEPolicy(beta=0.7, grouping="kmeans")
        >>> policy
        STAEPolicy(beta=0.7, redundancy='knn', k=5, h=None, grouping='kmeans', n_groups=None, inverted=False, unit='page', embedder='hashing:v1-seed0:256', seed=0)
    """

    name = "stae"

    def __init__(
        self,
        *,
        beta: float = 0.5,
        redundancy: Literal["knn", "centroid"] = "knn",
        k: int = 5,
        h: float | None = None,
        grouping: Literal["global", "kmeans", "temporal"] = "global",
        n_groups: int | None = None,
        inverted: bool = False,
        unit: Literal["page", "exchange"] = "page",
        embedder: str | Embedder | None = None,
        seed: int = 0,
    ) -> None:
        _check_number("beta", beta, low=0.0, high=1.0, what="a number in [0, 1]")
        _check_choice("redundancy", redundancy, REDUNDANCIES)
        _check_integer("k", k, low=1, what="a positive integer")
        if h is not None:
            _check_number("h", h, low=0.0, high=None, what="a positive number or None", strict=True)
        _check_choice("grouping", grouping, GROUPINGS)
        if n_groups is not None:
            _check_integer("n_groups", n_groups, low=1, what="a positive integer or None")
            if grouping == "global":
                raise ValueError("`n_groups` needs `grouping='kmeans'` or `'temporal'`.")
        if not isinstance(inverted, bool):
            raise ValueError(f"`inverted` must be a bool, got {inverted!r}.")  # noqa: TRY004 (spec strings)
        _check_integer("seed", seed, low=0, what="a non-negative integer")
        self.beta = float(beta)
        self.redundancy = redundancy
        self.k = k
        self.h = None if h is None else float(h)
        self.grouping = grouping
        self.n_groups = n_groups
        self.inverted = inverted
        self.seed = seed
        self.vectors = PageVectors(embedder=embedder, unit=unit)
        self._layouts: LRU[tuple[Any, ...], _Layout] = LRU(8)  # a few threads' steps at a time

    @property
    def unit(self) -> str:
        """``"page"`` or ``"exchange"``."""
        return self.vectors.unit

    @property
    def embedder(self) -> Embedder:
        """The embedder of page vectors."""
        return self.vectors.embedder

    def __repr__(self) -> str:
        return (
            f"STAEPolicy(beta={self.beta}, redundancy={self.redundancy!r}, k={self.k}, h={self.h}, "
            f"grouping={self.grouping!r}, n_groups={self.n_groups}, inverted={self.inverted}, "
            f"unit={self.unit!r}, embedder={self.embedder.name!r}, seed={self.seed})"
        )

    # -- features: one vector per page, at formation -------------------------------------------

    def features(self, pages: Sequence[Sequence[BaseMessage]]) -> list[dict[str, Any]]:
        """Each new page's vector (see `PageVectors.features`), one batched embed call."""
        return self.vectors.features(pages)

    async def afeatures(self, pages: Sequence[Sequence[BaseMessage]]) -> list[dict[str, Any]]:
        """Async `features`, awaiting the embedder."""
        return await self.vectors.afeatures(pages)

    # -- selection ---------------------------------------------------------------------------

    def victim(self, candidates: Sequence[Candidate], context: PolicyContext) -> Candidate:
        """The best-scoring candidate of the group furthest below its share of this step's evictions."""
        current = {c.key for c in candidates}
        # The step's candidate set as it was before this step's evictions, so groups and
        # their shares stay fixed while victims are taken one by one.
        evicted = [c for c in context.evicted if c.key not in current]
        layout = self._layout([*candidates, *evicted])
        by_key = {c.key: c for c in candidates}
        done = [0] * len(layout.groups)
        for c in evicted:
            done[layout.group_of[c.key]] += 1
        total, so_far = len(layout.keys), sum(done)
        best = None
        for g, members in enumerate(layout.groups):
            alive = np.array([i for i in members if layout.keys[i] in by_key], dtype=np.int64)
            if not len(alive):
                continue
            deficit = round(len(members) * (so_far + 1) / total - done[g], _DIGITS)
            scores = self._scores(layout, alive)
            pick = self._pick(layout, alive, scores)
            score = scores[pick]
            rank = (-deficit, -score if not self.inverted else score, layout.positions[alive[pick]])
            if best is None or rank < best[0]:
                best = (rank, layout.keys[alive[pick]])
        assert best is not None
        return by_key[best[1]]

    def scores(self, candidates: Sequence[Candidate]) -> dict[str, float]:
        """S of each candidate within its group (grouping `candidates` as `victim` would).

        Example:
            >>> from langchain_core.messages import HumanMessage
            >>> def page(key, position, text):
            ...     return Candidate(key=key, kind="page", page_ids=(key,), position=position, tokens=1,
            ...                      created_turn=0, last_access=0, access_count=0,
            ...                      messages=(HumanMessage(text),))
            >>> STAEPolicy(beta=0.0).scores([page("p1", 1, "a"), page("p2", 2, "b"), page("p3", 3, "c")])
            {'p1': 1.0, 'p2': 0.5, 'p3': 0.0}
        """
        layout = self._layout(list(candidates))
        out = {}
        for members in layout.groups:
            for i, s in zip(members, self._scores(layout, members), strict=True):
                out[layout.keys[i]] = float(s)
        return {c.key: out[c.key] for c in candidates}

    def _pick(self, layout: _Layout, alive: np.ndarray, scores: np.ndarray) -> int:
        """Index into `alive` of the group's victim: highest S (lowest if inverted), oldest on ties."""
        signed = scores if self.inverted else -scores
        return min(range(len(alive)), key=lambda i: (signed[i], layout.positions[alive[i]]))

    def _scores(self, layout: _Layout, members: np.ndarray) -> np.ndarray:
        """S of `members` (indices in age order) as one group, rounded."""
        m = len(members)
        age = np.ones(m) if m == 1 else 1.0 - np.arange(m) / (m - 1)  # members are in age order
        redundancy = self._redundancy(layout, members) if self.beta > 0 else np.zeros(m)
        return np.round(self.beta * redundancy + (1.0 - self.beta) * age, _DIGITS)

    def _redundancy(self, layout: _Layout, members: np.ndarray) -> np.ndarray:
        m = len(members)
        if m < 2:
            return np.zeros(m)
        if self.redundancy == "centroid":
            vectors = layout.vectors[members]
            centroid = vectors.mean(0)
            norm = np.linalg.norm(centroid)
            if norm > 0:
                centroid = centroid / norm
            closeness = -np.linalg.norm(vectors - centroid, axis=1)  # R = 1 - D_norm
            return _min_max(closeness)
        sq = layout.sq_distances[np.ix_(members, members)]
        h = self.h if self.h is not None else _median_bandwidth(sq)
        if h is None:  # every pair coincides
            return np.zeros(m)
        kk = min(self.k, m - 1)
        others = sq + np.diag(np.full(m, np.inf))
        nearest = np.partition(others, kk - 1, axis=1)[:, :kk]
        density = np.exp(-nearest / (2.0 * h * h)).mean(1)
        return _min_max(density)

    # -- layout cache ------------------------------------------------------------------------

    def _layout(self, candidates: list[Candidate]) -> _Layout:
        ordered = sorted(candidates, key=lambda c: (c.position, c.key))
        key = tuple((c.key, c.position, self.vectors.stored(c.features) or _text_key(c)) for c in ordered)
        layout = self._layouts.get(key)
        if layout is None:
            layout = self._build(ordered)
            self._layouts.put(key, layout)
        return layout

    def _build(self, ordered: list[Candidate]) -> _Layout:
        vectors = self.vectors.matrix([c.messages for c in ordered], [c.features for c in ordered])
        vectors = vectors.astype(np.float64)
        sq = pairwise_sq_distances(vectors)
        n = len(ordered)
        labels = self._group_labels(vectors, sq)
        groups = tuple(np.flatnonzero(labels == g) for g in range(int(labels.max()) + 1))
        keys = tuple(c.key for c in ordered)
        return _Layout(
            keys=keys,
            positions=np.array([c.position for c in ordered]),
            vectors=vectors,
            sq_distances=sq,
            groups=groups,
            group_of={keys[i]: int(labels[i]) for i in range(n)},
        )

    def _group_labels(self, vectors: np.ndarray, sq: np.ndarray) -> np.ndarray:
        """Group of each candidate (candidates in age order), numbered from 0."""
        n = len(vectors)
        if self.grouping == "global" or n < 2:
            return np.zeros(n, dtype=np.int64)
        if self.grouping == "temporal":
            chunks = min(self.n_groups or _TEMPORAL_GROUPS, n)
            labels = np.zeros(n, dtype=np.int64)
            for g, chunk in enumerate(np.array_split(np.arange(n), chunks)):
                labels[chunk] = g
            return labels
        if self.n_groups is not None:
            return kmeans(vectors, min(self.n_groups, n), seed=self.seed).labels
        low, high = _SILHOUETTE_K
        return choose_k(vectors, k_min=low, k_max=high, seed=self.seed, sq_distances=sq).labels


def _check_number(
    name: str, value: Any, *, low: float, high: float | None, what: str, strict: bool = False
) -> None:
    ok = not isinstance(value, bool) and isinstance(value, (int, float))
    ok = ok and (value > low if strict else value >= low) and (high is None or value <= high)
    if not ok:
        raise ValueError(f"`{name}` must be {what}, got {value!r}.")


def _check_integer(name: str, value: Any, *, low: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"`{name}` must be {what}, got {value!r}.")


def _check_choice(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {', '.join(map(repr, choices))}, got {value!r}.")


def _text_key(candidate: Candidate) -> Any:
    return ("text", candidate.kind, candidate.text)


def _min_max(values: np.ndarray) -> np.ndarray:
    """Values scaled to [0, 1]; all-equal values (within float noise) give zeros."""
    low, high = float(values.min()), float(values.max())
    if high - low <= 1e-12:
        return np.zeros_like(values)
    return (values - low) / (high - low)


def _median_bandwidth(sq: np.ndarray) -> float | None:
    """Median pairwise distance of a group; of the non-zero ones if most pairs coincide."""
    distances = np.sqrt(sq[np.triu_indices(len(sq), 1)])
    median = float(np.median(distances))
    if median > 0:
        return median
    positive = distances[distances > 0]
    return float(np.median(positive)) if len(positive) else None
