"""Which graph stores a middleware or node has paged into, so ``paging.page_store`` can answer.

A middleware built without ``store=`` pages into the store of the graph running each call. The
README's ``paging.page_store.get(thread, "p3")`` then means "the pages of my agent": while every
call so far came with one store, that store is meant. With several (one middleware shared by
agents over different stores) the question has no single answer and the error says how to ask it.
Stores are held weakly: the set names the graphs' stores, it keeps none alive.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

from langgraph.store.base import BaseStore

if TYPE_CHECKING:
    from langmem_paging.runtime.pager import Pager
    from langmem_paging.storage.page_store import PageStore

__all__ = ["GraphStores"]


class GraphStores:
    """The graph stores seen by one middleware or node (weakly held)."""

    def __init__(self) -> None:
        self._stores: weakref.WeakSet[BaseStore] = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, store: BaseStore | None) -> None:
        """Remember the store of a call (None: the graph has none)."""
        if store is not None and store not in self._stores:
            with self._lock:
                self._stores.add(store)

    def page_store(self, pager: Pager, owner: str) -> PageStore:
        """The page store `owner` (``"PagingMiddleware"``, ``"PagingNode"``) reads pages from.

        Raises:
            ValueError: Before any call, or when calls came with several stores.
        """
        if pager.page_store is not None:
            return pager.page_store
        with self._lock:
            stores = list(self._stores)
        if len(stores) == 1:
            return pager.page_store_for(stores[0])
        if not stores and pager.has_fallback_store():
            return pager.page_store_for(None)
        if not stores:
            raise ValueError(
                f"This {owner} has no store of its own and has not run yet, so it does not know its graph's "
                f"store. Pass `store=` to the {owner}, or read pages with `PageStore(store)` over the graph's store."
            )
        raise ValueError(
            f"This {owner} has no store of its own and has paged into {len(stores)} graph stores (one "
            f"{owner} shared by several agents). Read pages with `PageStore(store)` over the store you mean."
        )
