"""The shipped conformance checks run against every built-in policy, bookmarker and store, and
catch what they claim to catch."""

from __future__ import annotations

import pytest

from langmem_paging.strategies.bookmarks import BOOKMARKERS, Bookmark, Bookmarker
from langmem_paging.strategies.policies import POLICIES
from langmem_paging.strategies.policy import EvictionPolicy
from langmem_paging.testing.conformance import validate_bookmarker, validate_policy, validate_store


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_builtin_policy_conforms(name):
    validate_policy(POLICIES[name])


@pytest.mark.parametrize("name", sorted(BOOKMARKERS))
def test_every_builtin_bookmarker_conforms(name):
    validate_bookmarker(BOOKMARKERS[name]())


def test_every_store_backend_conforms(base_store):
    validate_store(base_store)


def test_a_nondeterministic_policy_is_caught():
    import random

    class Coin(EvictionPolicy):
        name = "coin"

        def victim(self, candidates, context):
            return random.choice(list(candidates))

    with pytest.raises(AssertionError, match="deterministic|rebuilt"):
        for _ in range(5):  # the chance that five coin-flip replays all agree is negligible
            validate_policy(Coin)


def test_a_bookmarker_that_forgets_its_page_id_is_caught():
    class Wrong(Bookmarker):
        def bookmark(self, pages, context):
            return [Bookmark("[p999:x]", ["x"]) for _ in pages]

    with pytest.raises(AssertionError, match="does not name"):
        validate_bookmarker(Wrong())
