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

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from langmem_paging.strategies.policy import Candidate, EvictionPolicy, PolicyContext

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


class FIFOPolicy(EvictionPolicy):
    """Evict what entered the context first: the oldest position."""

    name = "fifo"

    def key(self, candidate: Candidate, context: PolicyContext) -> tuple[Any, ...]:
        return (candidate.position,)


class LRUPolicy(EvictionPolicy):
    """Evict what was used least recently: formation or last recall, oldest first."""

    name = "lru"

    def key(self, candidate: Candidate, context: PolicyContext) -> tuple[Any, ...]:
        return (candidate.last_access, candidate.position)


class LFUPolicy(EvictionPolicy):
    """Evict what was recalled least often; recency, then position, break ties."""

    name = "lfu"

    def key(self, candidate: Candidate, context: PolicyContext) -> tuple[Any, ...]:
        return (candidate.access_count, candidate.last_access, candidate.position)


class SemanticPolicy(EvictionPolicy):
    """Evict what is least similar (cosine of embedder vectors) to the recent context.

    Each page is embedded once, when it forms (`features`); the recent context
    (`PolicyContext.recent_text`) is embedded once per step. Recall copies, which have
    no stored vector, are embedded from their text when first compared (see
    `langmem_paging.strategies.vectors`). Ties go to the oldest position.

    Args:
        embedder: An `Embedder`, or a spec for `get_embedder`; None: the model-free
            `HashingEmbedder` (shared words and word pieces, no meaning).
    """

    name = "semantic"

    def __init__(self, *, embedder: Any = None) -> None:
        from langmem_paging.strategies.vectors import PageVectors  # numpy and embedders load only when used

        self.vectors = PageVectors(embedder=embedder)

    def features(self, pages: Sequence[Sequence[BaseMessage]]) -> list[dict[str, Any]]:
        return self.vectors.features(pages)

    async def afeatures(self, pages: Sequence[Sequence[BaseMessage]]) -> list[dict[str, Any]]:
        return await self.vectors.afeatures(pages)

    def victim(self, candidates: Sequence[Candidate], context: PolicyContext) -> Candidate:
        matrix = self.vectors.matrix([c.messages for c in candidates], [c.features for c in candidates])
        similarity = matrix @ self.vectors.embed_text(context.recent_text)
        return min(
            zip(candidates, similarity.tolist(), strict=True),
            key=lambda cs: (round(cs[1], 9), cs[0].position),
        )[0]


def _stae(**options: Any) -> EvictionPolicy:
    from langmem_paging.strategies.stae import STAEPolicy  # numpy loads only when STAE is used

    return STAEPolicy(**options)


POLICIES: dict[str, Callable[..., EvictionPolicy]] = {
    "fifo": FIFOPolicy,
    "lru": LRUPolicy,
    "lfu": LFUPolicy,
    "semantic": SemanticPolicy,
    "stae": _stae,
}


def get_policy(policy: str | EvictionPolicy) -> EvictionPolicy:
    """A policy from its name, a ``"name:option=value,..."`` spec, or as given.

    Option values are read as None, true/false, integers, floats, or else strings.

    Example:
        >>> get_policy("stae:beta=0.8,grouping=temporal,n_groups=3").n_groups
        3
        >>> get_policy("fifo:beta=1")
        Traceback (most recent call last):
        ...
        ValueError: Invalid options for policy 'fifo': FIFOPolicy() takes no arguments
    """
    if isinstance(policy, EvictionPolicy):
        return policy
    if isinstance(policy, str):
        name, _, spec = policy.partition(":")
        if name in POLICIES:
            if not spec:
                return POLICIES[name]()
            options = _parse_options(name, spec)
            try:
                return POLICIES[name](**options)
            except TypeError as exc:
                raise ValueError(f"Invalid options for policy {name!r}: {exc}") from None
    available = ", ".join(repr(name) for name in POLICIES)
    raise ValueError(f"Unknown policy {policy!r}. Available: {available} (or an EvictionPolicy instance).")


def _parse_options(name: str, spec: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for item in spec.split(","):
        key, eq, raw = (part.strip() for part in item.partition("="))
        if not eq or not key.isidentifier():
            raise ValueError(f"Invalid options for policy {name!r}: expected `option=value`, got {item!r}.")
        options[key] = _parse_value(raw)
    return options


def _parse_value(raw: str) -> Any:
    lowered = raw.lower()
    if lowered in ("none", "null"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw
