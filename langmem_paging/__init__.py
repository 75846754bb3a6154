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
    "create_paging_agent": "integrations.agents",
    "BOUNDARIES": "strategies.boundaries",
    "BoundaryStrategy": "strategies.boundaries",
    "get_boundary": "strategies.boundaries",
    "Bookmark": "strategies.bookmarks",
    "BookmarkContext": "strategies.bookmarks",
    "Bookmarker": "strategies.bookmarks",
    "KeywordBookmarker": "strategies.bookmarks",
    "PageDraft": "strategies.bookmarks",
    "format_bookmark": "core.library_messages",
    "parse_bookmark": "core.library_messages",
    "PagingConfig": "config",
    "PagingWarning": "core.errors",
    "PageEvent": "core.hooks",
    "PagingHooks": "core.hooks",
    "is_bookmark": "core.messages",
    "PagingAgentState": "integrations.middleware",
    "PagingMiddleware": "integrations.middleware",
    "PagingMessagesState": "integrations.node",
    "PagingNode": "integrations.node",
    "Pager": "runtime.pager",
    "PagingResult": "step.result",
    "apage_messages": "step.pure",
    "page_messages": "step.pure",
    "reconstruct_history": "recall.history",
    "POLICIES": "strategies.policies",
    "Candidate": "strategies.policy",
    "EvictionPolicy": "strategies.policy",
    "PolicyContext": "strategies.policy",
    "get_policy": "strategies.policies",
    "SemanticPolicy": "strategies.policies",
    "STAEPolicy": "strategies.stae",
    "Embedder": "strategies.embeddings",
    "HashingEmbedder": "strategies.embeddings",
    "get_embedder": "strategies.embeddings",
    "DiscriminativeBookmarker": "strategies.bookmarks",
    "make_recall_tool": "integrations.recall_tool",
    "ClusterNode": "core.records",
    "Page": "core.records",
    "InMemoryBM25Index": "index.base",
    "SearchIndex": "index.base",
    "PagingChannel": "core.state",
    "PagingState": "core.state",
    "paging_reducer": "core.state",
    "PageStore": "storage.page_store",
    "thread_namespace": "storage.page_store",
    "TokenCounter": "core.tokens",
    "SqliteSearchIndex": "index.sqlite",
    "PostgresSearchIndex": "index.postgres",
    "TierScoring": "strategies.tiers",
    "UtilityScoring": "strategies.tiers",
    "LLMBookmarker": "strategies.llm",
    "LLMDigester": "strategies.llm",
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
    "LLMBookmarker",
    "LLMDigester",
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
    "PagingWarning",
    "PolicyContext",
    "PostgresSearchIndex",
    "STAEPolicy",
    "SearchIndex",
    "SemanticPolicy",
    "SqliteSearchIndex",
    "TierScoring",
    "TokenCounter",
    "UtilityScoring",
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
    from langmem_paging.config import PagingConfig
    from langmem_paging.core.hooks import PageEvent, PagingHooks
    from langmem_paging.core.library_messages import format_bookmark, parse_bookmark
    from langmem_paging.core.messages import is_bookmark
    from langmem_paging.core.records import ClusterNode, Page
    from langmem_paging.core.state import PagingChannel, PagingState, paging_reducer
    from langmem_paging.core.tokens import TokenCounter
    from langmem_paging.index.base import InMemoryBM25Index, SearchIndex
    from langmem_paging.index.postgres import PostgresSearchIndex
    from langmem_paging.index.sqlite import SqliteSearchIndex
    from langmem_paging.integrations.agents import create_paging_agent
    from langmem_paging.integrations.middleware import PagingAgentState, PagingMiddleware
    from langmem_paging.integrations.node import PagingMessagesState, PagingNode
    from langmem_paging.integrations.recall_tool import make_recall_tool
    from langmem_paging.recall.history import reconstruct_history
    from langmem_paging.runtime.pager import Pager
    from langmem_paging.step.pure import apage_messages, page_messages
    from langmem_paging.step.result import PagingResult
    from langmem_paging.storage.page_store import PageStore, thread_namespace
    from langmem_paging.strategies.bookmarks import (
        Bookmark,
        BookmarkContext,
        Bookmarker,
        DiscriminativeBookmarker,
        KeywordBookmarker,
        PageDraft,
    )
    from langmem_paging.strategies.boundaries import BOUNDARIES, BoundaryStrategy, get_boundary
    from langmem_paging.strategies.embeddings import Embedder, HashingEmbedder, get_embedder
    from langmem_paging.strategies.llm import LLMBookmarker, LLMDigester
    from langmem_paging.strategies.policies import POLICIES, SemanticPolicy, get_policy
    from langmem_paging.strategies.policy import Candidate, EvictionPolicy, PolicyContext
    from langmem_paging.strategies.stae import STAEPolicy
    from langmem_paging.strategies.tiers import TierScoring, UtilityScoring
