"""Cooperative memory paging for LangGraph agents.

messages -> pages (boundaries) -> policy (eviction) -> bookmark -> cold tier (clusters)
-> store -> recall.

Names are imported lazily, so ``import langmem_paging`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.4.0"

_EXPORTS = {
    "create_paging_agent": "agents",
    "BOUNDARIES": "boundaries",
    "BoundaryStrategy": "boundaries",
    "get_boundary": "boundaries",
    "Bookmark": "bookmarks",
    "BookmarkContext": "bookmarks",
    "Bookmarker": "bookmarks",
    "KeywordBookmarker": "bookmarks",
    "PageDraft": "bookmarks",
    "format_bookmark": "library_messages",
    "parse_bookmark": "library_messages",
    "PagingConfig": "config",
    "PageEvent": "hooks",
    "PagingHooks": "hooks",
    "is_bookmark": "messages",
    "PagingAgentState": "middleware",
    "PagingMiddleware": "middleware",
    "PagingMessagesState": "node",
    "PagingNode": "node",
    "Pager": "pager",
    "PagingResult": "paging",
    "apage_messages": "paging",
    "page_messages": "paging",
    "reconstruct_history": "history",
    "POLICIES": "policies",
    "Candidate": "policies",
    "EvictionPolicy": "policies",
    "PolicyContext": "policies",
    "get_policy": "policies",
    "SemanticPolicy": "policies",
    "STAEPolicy": "stae",
    "Embedder": "embeddings",
    "HashingEmbedder": "embeddings",
    "get_embedder": "embeddings",
    "DiscriminativeBookmarker": "bookmarks",
    "make_recall_tool": "recall",
    "ClusterNode": "records",
    "Page": "records",
    "InMemoryBM25Index": "search",
    "SearchIndex": "search",
    "PagingChannel": "state",
    "PagingState": "state",
    "paging_reducer": "state",
    "PageStore": "store",
    "thread_namespace": "store",
    "TokenCounter": "tokens",
}

__all__ = [
    "BOUNDARIES",
    "Bookmark",
    "BookmarkContext",
    "Bookmarker",
    "BoundaryStrategy",
    "Candidate",
    "ClusterNode",
    "DiscriminativeBookmarker",
    "Embedder",
    "EvictionPolicy",
    "HashingEmbedder",
    "InMemoryBM25Index",
    "KeywordBookmarker",
    "POLICIES",
    "Page",
    "PageDraft",
    "PageEvent",
    "PageStore",
    "Pager",
    "PagingAgentState",
    "PagingChannel",
    "PagingConfig",
    "PagingHooks",
    "PagingMessagesState",
    "PagingMiddleware",
    "PagingNode",
    "PagingResult",
    "PagingState",
    "PolicyContext",
    "STAEPolicy",
    "SearchIndex",
    "SemanticPolicy",
    "TokenCounter",
    "apage_messages",
    "create_paging_agent",
    "format_bookmark",
    "get_boundary",
    "get_embedder",
    "get_policy",
    "is_bookmark",
    "make_recall_tool",
    "page_messages",
    "paging_reducer",
    "parse_bookmark",
    "reconstruct_history",
    "thread_namespace",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'langmem_paging' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"langmem_paging.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])


if TYPE_CHECKING:
    from langmem_paging.agents import create_paging_agent
    from langmem_paging.bookmarks import (
        Bookmark,
        BookmarkContext,
        Bookmarker,
        DiscriminativeBookmarker,
        KeywordBookmarker,
        PageDraft,
    )
    from langmem_paging.boundaries import BOUNDARIES, BoundaryStrategy, get_boundary
    from langmem_paging.config import PagingConfig
    from langmem_paging.embeddings import Embedder, HashingEmbedder, get_embedder
    from langmem_paging.history import reconstruct_history
    from langmem_paging.hooks import PageEvent, PagingHooks
    from langmem_paging.library_messages import format_bookmark, parse_bookmark
    from langmem_paging.messages import is_bookmark
    from langmem_paging.middleware import PagingAgentState, PagingMiddleware
    from langmem_paging.node import PagingMessagesState, PagingNode
    from langmem_paging.pager import Pager
    from langmem_paging.paging import PagingResult, apage_messages, page_messages
    from langmem_paging.policies import (
        POLICIES,
        Candidate,
        EvictionPolicy,
        PolicyContext,
        SemanticPolicy,
        get_policy,
    )
    from langmem_paging.recall import make_recall_tool
    from langmem_paging.records import ClusterNode, Page
    from langmem_paging.search import InMemoryBM25Index, SearchIndex
    from langmem_paging.stae import STAEPolicy
    from langmem_paging.state import PagingChannel, PagingState, paging_reducer
    from langmem_paging.store import PageStore, thread_namespace
    from langmem_paging.tokens import TokenCounter
