"""The eviction policy interface: the step does the accounting, a policy answers one question.

`EvictionPolicy.victim(candidates, context)` picks which resident page leaves next. A `Candidate`
is a resident page, or a resident copy of an evicted page that `recall` brought back (evicting a
copy shrinks it back to a reference); `PolicyContext` is what the step knows of the call. Policies
that need per-page features (a vector, say) compute them once, when a page forms, in `features` /
`afeatures` (batched, may await a model); the features are stored with the page and handed back on
every candidate. Policies also receive the page life events of `PagingHooks` (formed, evicted,
recalled). The built-in policies are in `langmem_paging.strategies.policies` (FIFO, LRU, LFU,
semantic) and `langmem_paging.strategies.stae` (STAE).
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from langchain_core.messages import BaseMessage

from langmem_paging.core.hooks import PagingHooks
from langmem_paging.core.text import content_terms
from langmem_paging.core.tokens import message_text

__all__ = ["Candidate", "EvictionPolicy", "PolicyContext"]


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
    terms: Mapping[str, float] = field(default_factory=dict)
    """Its page's strongest terms with weights (from its bookmark; empty for a recall copy)."""

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

    def key(self, candidate: Candidate, context: PolicyContext) -> tuple[Any, ...]:
        """Sort key; ties must be broken deterministically (position last)."""
        raise TypeError(f"{type(self).__name__} must define `victim` or `key`.")

    def resident_limit(self, budget: int) -> int | None:
        """Tokens resident pages may take whatever the budget leaves (None: only the budget bounds
        them). A tiered policy keeps its hot tier small this way."""
        return None

    def features(self, pages: Sequence[Sequence[BaseMessage]]) -> list[dict[str, Any]]:
        """Per-page features to keep with each newly formed page (JSON-safe), computed once."""
        return [{} for _ in pages]

    async def afeatures(self, pages: Sequence[Sequence[BaseMessage]]) -> list[dict[str, Any]]:
        """Async `features` (override to await an embedder); by default the sync one."""
        return self.features(pages)
