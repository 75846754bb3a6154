"""Eviction policies: which resident page leaves the context next.

The paging step does the budget accounting; a policy answers one question,
`victim(candidates, context)`. A candidate is a resident page, or a resident copy
of an evicted page that `recall` brought back (evicting a copy shrinks it back to a
reference). Policies that need per-page features (a vector, say) compute them once,
when a page forms, in `features` / `afeatures` (batched, may await a model); the
features are stored with the page and handed back on every candidate. Policies also
receive the page life events of `PagingHooks` (formed, evicted, recalled).
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from langchain_core.messages import BaseMessage

from langmem_paging.hooks import PagingHooks
from langmem_paging.text import content_terms, cosine, tfidf
from langmem_paging.tokens import message_text

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


@dataclass
class Candidate:
    """Something resident that eviction could remove."""

    key: str
    """The page id, or the message id of a recall copy."""
    kind: Literal["page", "copy"]
    """``page``: evict into the store behind a bookmark; ``copy``: shrink a recall result."""
    page_ids: tuple[str, ...]
    """The page itself, or the pages the copy carries."""
    position: int
    """Index in the context: the order in which things entered it."""
    tokens: int
    """Tokens it holds now."""
    created_turn: int
    """User turn in which it entered the context."""
    last_access: int
    """User turn of its latest use (formation or recall)."""
    access_count: int
    """Recalls of the page(s) it holds."""
    messages: tuple[BaseMessage, ...] = ()
    """Its messages as they are in the context."""
    features: Mapping[str, Any] = field(default_factory=dict)
    """Features computed when its page formed (see `EvictionPolicy.features`)."""

    @cached_property
    def text(self) -> str:
        """Its text as the model reads it."""
        return "\n".join(message_text(m) for m in self.messages)


@dataclass
class PolicyContext:
    """What a policy may know besides the candidates."""

    turn: int
    """The current user turn."""
    recent_text: str
    """Text of the current turn and the messages just before it."""
    evicted: list[Candidate] = field(default_factory=list)
    """Candidates already chosen in this step, in order."""

    @cached_property
    def recent_terms(self) -> list[str]:
        """Content words of `recent_text`."""
        return content_terms(self.recent_text)


class EvictionPolicy(PagingHooks, ABC):
    """Chooses the next candidate to evict; by default the one with the lowest `key`."""

    name: str = "policy"

    def victim(self, candidates: Sequence[Candidate], context: PolicyContext) -> Candidate:
        """The candidate to evict next (`candidates` is never empty)."""
        return min(candidates, key=lambda c: self.key(c, context))

    def key(self, candidate: Candidate, context: PolicyContext) -> tuple:
        """Sort key; ties must be broken deterministically (position last)."""
        raise TypeError(f"{type(self).__name__} must define `victim` or `key`.")

    def features(self, pages: Sequence[Sequence[BaseMessage]]) -> list[dict[str, Any]]:
        """Per-page features to keep with each newly formed page (JSON-safe), computed once."""
        return [{} for _ in pages]

    async def afeatures(self, pages: Sequence[Sequence[BaseMessage]]) -> list[dict[str, Any]]:
        """Async `features` (override to await an embedder); by default the sync one."""
        return self.features(pages)


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
    """Evict what is least similar (TF-IDF cosine) to the recent context; no model needed.

    IDF comes from the candidates themselves, so terms common to everything resident
    weigh little.
    """

    name = "semantic"

    def victim(self, candidates, context):
        docs = {c.key: content_terms(c.text) for c in candidates}
        doc_freq: dict[str, int] = {}
        for terms in docs.values():
            for term in set(terms):
                doc_freq[term] = doc_freq.get(term, 0) + 1
        n = len(candidates)
        recent = tfidf(context.recent_terms, doc_freq, n)
        return min(
            candidates,
            key=lambda c: (round(cosine(tfidf(docs[c.key], doc_freq, n), recent), 12), c.position),
        )


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
    if isinstance(policy, str) and policy in POLICIES:
        return POLICIES[policy]()
    available = ", ".join(repr(name) for name in POLICIES)
    raise ValueError(f"Unknown policy {policy!r}. Available: {available} (or an EvictionPolicy instance).")
