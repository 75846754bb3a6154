"""The failures `on_store_error` is about: the page store or the search index failed.

Only these fall under ``on_store_error="continue"`` (the turn goes on unpaged); every other
exception (a policy's bug, a bookmarker's network error) propagates with its own type. The
original error is the ``__cause__``.
"""

from __future__ import annotations

__all__ = ["LifecycleChanged", "PageStoreError", "PagingWarning", "SearchIndexError", "StorageError"]


class StorageError(Exception):
    """The page store or the search index failed (after the store's retries)."""


class PageStoreError(StorageError):
    """A call to the page store (a LangGraph `BaseStore`) failed after its retries."""


class SearchIndexError(StorageError):
    """A call to the search index failed."""


class LifecycleChanged(PageStoreError):
    """A forget landed on the thread while a step ran (its lifecycle generation moved between the
    step's start and its commit): the step's new records may hold what was forgotten, so none is
    written. The engine steps again from the records; after a few such races it reports this."""


class PagingWarning(RuntimeWarning):
    """What langmem-paging warns about: a budget that what nothing may evict passes, a store failing
    under ``on_store_error="continue"``, pages larger than a recall returns, a tokenizer that is not
    the model's, no store given. A `RuntimeWarning`, so filters on those apply to it too."""
