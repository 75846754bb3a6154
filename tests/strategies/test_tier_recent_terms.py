"""A tier mode that never reads the recent context's terms is not given them: stemming the recent
text was a fifth of a quiet call with utility tiers (issue 23's per-call cost)."""

from __future__ import annotations

import sys

import pytest

import langmem_paging.strategies.tiers as tiers_module
from langmem_paging.strategies.tiers import TierScoring, UtilityScoring
from tests.support.conversations import beehive_notes
from tests.support.harness import replay


@pytest.mark.parametrize(("tiers", "stems_recent"), [(UtilityScoring(tau=2.0), False), (TierScoring(), True)])
def test_the_recent_text_is_stemmed_only_for_a_mode_that_reads_it(monkeypatch, tiers, stems_recent):
    calls = []

    def counting(module):
        original = module.search_terms

        def search_terms(text, *args, **kwargs):
            if sys._getframe(1).f_code.co_name == "recent_terms":  # not the digests' own terms
                calls.append(text)
            return original(text, *args, **kwargs)

        monkeypatch.setattr(module, "search_terms", search_terms)

    counting(tiers_module)
    run = replay(beehive_notes(80), max_tokens=900, boundary="fixed_2", tiers=tiers)
    assert any(e.tier == "warm" for step in run.steps for e in step.state.shown.values()), "warm pages chosen"
    assert bool(calls) is stems_recent


def test_utility_scores_do_not_depend_on_recent_terms():
    from langmem_paging.strategies.tiers import TierItem

    items = [
        TierItem("p1", 100, 1, 3, 2, {"bees": 1.0}, 1.0),
        TierItem("p2", 80, 2, 5, 0, {"lake": 1.0}, 1.0),
    ]
    mode = UtilityScoring(tau=5)
    assert mode.scores(items, turn=9, recent_terms=[]) == mode.scores(
        items, turn=9, recent_terms=["bees", "lake"]
    )
