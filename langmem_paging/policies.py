"""Eviction policies: which resident page leaves the context next.

The paging loop (`langmem_paging.paging`) does the budget accounting; a policy
only ranks candidates. A candidate is a resident page, or a resident copy of an
evicted page that `recall` brought back (evicting a copy shrinks it back to a
reference). Access statistics come from the ledger: a recall is an access.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from langmem_paging.text import content_terms, cosine, tfidf

__all__ = [
    "POLICIES",
    "Candidate",
    "EvictionPolicy",
    "FIFOPolicy",
    "LFUPolicy",
    "LRUPolicy",
    "PolicyContext",
    "SemanticPolicy",
    "get_policy",
]


@dataclass(frozen=True)
class Candidate:
    """Something resident that eviction could remove."""

    key: str
    """The page id, or the message id of a recall copy."""
    kind: Literal["page", "copy"]
    """``page``: evict into the store behind a bookmark; ``copy``: shrink a recall result."""
    page_ids: tuple[str, ...]
    """The page itself, or the pages the copy carries."""
    position: int
    """Index in the message list: the order in which things entered the context."""
    tokens: int
    """Tokens it holds now."""
    text: str
    """Its text, for content-aware policies."""
    created_turn: int
    """User turn in which it entered the context."""
    last_access: int
    """User turn of its latest use (formation or recall)."""
    access_count: int
    """Recalls of the page(s) it holds."""


@dataclass
class PolicyContext:
    """What a policy may know besides the candidates."""

    turn: int
    """The current user turn."""
    recent_text: str
    """Text of the current turn and the messages just before it."""
    doc_freq: Mapping[str, int] = field(default_factory=dict)
    """Page document frequencies of terms in this thread."""
    n_docs: int = 0
    """Pages formed in this thread."""

    @cached_property
    def recent_vector(self) -> dict[str, float]:
        """TF-IDF vector of `recent_text`."""
        return tfidf(content_terms(self.recent_text), self.doc_freq, self.n_docs)


class EvictionPolicy(ABC):
    """Ranks eviction candidates; the lowest `key` goes first."""

    name: str = "policy"

    def victim(self, candidates: Sequence[Candidate], context: PolicyContext) -> Candidate:
        """The candidate to evict next (`candidates` is never empty)."""
        return min(candidates, key=lambda c: self.key(c, context))

    @abstractmethod
    def key(self, candidate: Candidate, context: PolicyContext) -> tuple:
        """Sort key; ties must be broken deterministically (position last)."""


class FIFOPolicy(EvictionPolicy):
    """Evict what entered the context first: the oldest position."""

    name = "fifo"

    def key(self, candidate, context):
        return (candidate.position,)


class LRUPolicy(EvictionPolicy):
    """Evict what was used least recently: formation or last recall, oldest first."""

    name = "lru"

    def key(self, candidate, context):
        return (candidate.last_access, candidate.position)


class LFUPolicy(EvictionPolicy):
    """Evict what was recalled least often; recency, then position, break ties."""

    name = "lfu"

    def key(self, candidate, context):
        return (candidate.access_count, candidate.last_access, candidate.position)


class SemanticPolicy(EvictionPolicy):
    """Evict what is least similar (TF-IDF cosine) to the recent context; no model needed."""

    name = "semantic"

    def key(self, candidate, context):
        vector = tfidf(content_terms(candidate.text), context.doc_freq, context.n_docs)
        return (round(cosine(vector, context.recent_vector), 12), candidate.position)


POLICIES: dict[str, Callable[[], EvictionPolicy]] = {
    "fifo": FIFOPolicy,
    "lru": LRUPolicy,
    "lfu": LFUPolicy,
    "semantic": SemanticPolicy,
}


def get_policy(policy: str | EvictionPolicy) -> EvictionPolicy:
    """A policy from its name or as given."""
    if isinstance(policy, EvictionPolicy):
        return policy
    if policy in POLICIES:
        return POLICIES[policy]()
    available = ", ".join(repr(name) for name in POLICIES)
    raise ValueError(f"Unknown policy {policy!r}. Available: {available}.")
