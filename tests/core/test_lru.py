"""core.lru.LRU: the one bounded cache the strategies share (LLM replies, vectors, STAE layouts)."""

from __future__ import annotations

from langmem_paging.core.lru import LRU


def test_the_least_recently_used_entry_leaves_first() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the newest
    cache.put_many({"c": 3})
    assert cache.get_many(["a", "b", "c"]) == [1, None, 3]
    assert len(cache) == 2


def test_size_zero_keeps_nothing() -> None:
    cache: LRU[str, int] = LRU(0)
    cache.put("a", 1)
    assert cache.get("a") is None
    assert len(cache) == 0


def test_pop_forgets_one_entry_and_a_missing_key_is_no_error() -> None:
    cache: LRU[str, int] = LRU(2)
    cache.put_many({"a": 1, "b": 2})
    cache.pop("a")
    cache.pop("z")
    assert cache.get_many(["a", "b"]) == [None, 2] and len(cache) == 1
