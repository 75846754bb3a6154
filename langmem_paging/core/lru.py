"""A bounded map that forgets the least recently used entry first, safe across threads: the caches
of the strategies, of token counters, of the Postgres index, and the threads a node paged."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from typing import Generic, TypeVar

__all__ = ["LRU"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most `size` entries (0: none kept); reading or writing one makes it the newest."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: K) -> V | None:
        """The key's value, None where it is not kept."""
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def get_many(self, keys: Sequence[K]) -> list[V | None]:
        return [self.get(key) for key in keys]

    def put(self, key: K, value: V) -> None:
        if not self.size:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            if len(self._items) > self.size:
                self._items.popitem(last=False)

    def pop(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)

    def put_many(self, items: Mapping[K, V]) -> None:
        for key, value in items.items():
            self.put(key, value)
