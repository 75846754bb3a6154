"""Cooperative memory paging for LangGraph agents.

messages -> pages (boundaries) -> policy (eviction) -> bookmark -> store -> recall.
"""

from langmem_paging.bookmarks import Bookmarker, KeywordBookmarker, format_bookmark, parse_bookmark
from langmem_paging.boundaries import BOUNDARIES, BoundaryStrategy, get_boundary
from langmem_paging.config import PagingConfig
from langmem_paging.messages import is_bookmark
from langmem_paging.middleware import PagingMiddleware
from langmem_paging.node import PagingNode
from langmem_paging.pager import Pager
from langmem_paging.paging import PagingResult, apply_ledger, page_messages, reconstruct_history
from langmem_paging.policies import POLICIES, Candidate, EvictionPolicy, PolicyContext, get_policy
from langmem_paging.recall import make_recall_tool
from langmem_paging.records import Ledger, Page
from langmem_paging.store import PageStore, thread_namespace
from langmem_paging.tokens import TokenCounter

__version__ = "0.1.0"

__all__ = [
    "BOUNDARIES",
    "POLICIES",
    "Bookmarker",
    "BoundaryStrategy",
    "Candidate",
    "EvictionPolicy",
    "KeywordBookmarker",
    "Ledger",
    "Page",
    "PageStore",
    "Pager",
    "PagingConfig",
    "PagingMiddleware",
    "PagingNode",
    "PagingResult",
    "PolicyContext",
    "TokenCounter",
    "apply_ledger",
    "format_bookmark",
    "get_boundary",
    "get_policy",
    "is_bookmark",
    "make_recall_tool",
    "page_messages",
    "parse_bookmark",
    "reconstruct_history",
    "thread_namespace",
]
