"""Policy specs for the ablation and the needle benchmark."""

from __future__ import annotations

import sys
import types

import pytest

from evals.cli import main as evals_main
from evals.paging_method import PagingSession
from evals.policy_spec import paging_options, parse_spec, split_specs
from langmem_paging import PagingConfig
from langmem_paging.strategies.policies import LFUPolicy


def test_split_keeps_options_with_their_policy():
    assert split_specs(
        "fifo,stae:beta=0.5,redundancy=knn,grouping=kmeans,inverted=false,tiers:utility,lru"
    ) == ["fifo", "stae:beta=0.5,redundancy=knn,grouping=kmeans,inverted=false", "tiers:utility", "lru"]


def test_values_are_typed():
    spec = parse_spec("stae:beta=0.5,k=7,h=none,inverted=false,grouping=kmeans")
    assert spec.options == {"beta": 0.5, "k": 7, "h": None, "inverted": False, "grouping": "kmeans"}
    assert spec.tiers is None and spec.label == "stae:beta=0.5,k=7,h=none,inverted=false,grouping=kmeans"


@pytest.mark.parametrize(
    "bad", ["stae:beta", "Stae", "lfu+tiers:", "tiers:x+lfu", "lfu:k=1,k=2", "a+tiers:x+tiers:y"]
)
def test_malformed_specs_name_the_problem(bad):
    with pytest.raises(ValueError, match="Policy spec"):
        parse_spec(bad)


def test_plain_names_pass_through_and_unknown_ones_list_the_choices():
    assert paging_options("lfu") == {"policy": "lfu"}
    with pytest.raises(ValueError, match="Available: 'fifo'"):
        paging_options("lfuu")
    with pytest.raises(ValueError, match="LFUPolicy"):
        paging_options("lfu:beta=1")


def test_stae_spec_builds_the_class_with_its_options(monkeypatch):
    built = {}

    class FakeSTAE(LFUPolicy):
        def __init__(self, **kwargs):
            built.update(kwargs)

    monkeypatch.setitem(
        sys.modules, "langmem_paging.strategies.stae", types.SimpleNamespace(STAEPolicy=FakeSTAE)
    )
    options = paging_options("stae:beta=0.5,redundancy=knn,grouping=kmeans,inverted=false")
    assert isinstance(options["policy"], FakeSTAE)
    assert built == {"beta": 0.5, "redundancy": "knn", "grouping": "kmeans", "inverted": False}


def test_stae_spec_fails_clearly_without_the_class(monkeypatch):
    monkeypatch.setitem(sys.modules, "langmem_paging.strategies.stae", None)  # import fails
    from langmem_paging.strategies import policies

    monkeypatch.setattr(policies, "POLICIES", {k: v for k, v in policies.POLICIES.items() if k != "stae"})
    with pytest.raises(ValueError, match="STAEPolicy"):
        paging_options("stae:beta=0.5")


def test_tier_modes_go_to_paging_config_or_fail_clearly():
    if "tiers" in PagingConfig.fields():
        assert paging_options("lfu+tiers:importance") == {"policy": "lfu", "tiers": "importance"}
        assert paging_options("tiers:utility")["tiers"] == "utility"
    else:
        with pytest.raises(ValueError, match=r"PagingConfig\(tiers=...\)"):
            paging_options("tiers:importance")


def test_paging_session_builds_a_fresh_policy_object_per_thread():
    a = PagingSession(800, "fixed_10", "fifo")
    b = PagingSession(800, "fixed_10", "fifo")
    assert a.pager.engine.components.policy is not b.pager.engine.components.policy and a.index is not b.index


def test_ablate_refuses_a_bad_spec_before_running(tmp_path):
    with pytest.raises(SystemExit):
        evals_main(
            [
                "ablate",
                "--on",
                "synthetic",
                "--out",
                str(tmp_path),
                "--policies",
                "fifo,lfu:x=1",
                "--no-progress",
            ]
        )
    assert not (tmp_path / "results.jsonl").exists()
