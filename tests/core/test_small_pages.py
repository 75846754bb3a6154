"""Pages no bigger than their bookmark: paged out into a cluster (when that saves tokens), in it at
once, and never lost to the rebuilt history."""

from __future__ import annotations

import warnings

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.graph.message import add_messages

from langmem_paging import page_messages, reconstruct_history
from tests.support.harness import COUNTER
from tests.support.scenario_helpers import pure_thread


def test_a_page_evicted_straight_into_a_cluster_is_in_it_at_once():
    """A page smaller than its bookmark goes straight into the nearest cluster in the step that
    evicts it, even when no fold is due: shown by nothing, it was lost to reconstruct_history."""
    long = [
        m
        for i in range(6)
        for m in (
            HumanMessage(
                f"Zarko{i} keeps {i} beehives near Lake Bled{i} and sells honey in Radovljica{i}.", id=f"h{i}"
            ),
            AIMessage(f"Noted {i}.", id=f"a{i}"),
        )
    ]
    first = page_messages(long, max_tokens=150, boundary="fixed_1", bookmark_share=0.2, text_counter=COUNTER)
    assert first.state.clusters
    tiny = [m for i in range(6, 16) for m in (HumanMessage("ok", id=f"h{i}"), AIMessage("Fine.", id=f"a{i}"))]
    state = add_messages(first.apply(list(long)), tiny)
    second = page_messages(
        state,
        max_tokens=150,
        boundary="fixed_1",
        state=first.state.to_value(),
        bookmark_share=1.0,
        text_counter=COUNTER,
    )
    state = second.apply(state)
    assert {m.id for m in state} >= {s.anchor for s in second.state.shown.values()}
    pages = {p.id: p for r in (first, second) for p in r.pages}
    nodes = {n.id: n for r in (first, second) for n in r.nodes}
    history = reconstruct_history(state, pages, COUNTER, clusters=nodes, state=second.state.to_value())
    assert [m.id for m in history] == [m.id for m in long + tiny]


def test_pages_smaller_than_their_bookmark_are_paged_out_before_any_cluster_exists():
    """With no cluster yet, pages no bigger than their bookmark were never evicted: the context grew
    without bound. Together they now start a cluster (when that saves tokens) and the context fits."""
    history = [
        m for i in range(40) for m in (HumanMessage(f"ok {i}", id=f"h{i}"), AIMessage("k", id=f"a{i}"))
    ]
    result = page_messages(history, max_tokens=120, boundary="fixed_1", text_counter=COUNTER)
    assert not result.over_budget and result.tokens < result.tokens_before
    assert len(result.state.clusters) == 1
    state = result.apply(list(history))
    history_back = reconstruct_history(
        state,
        {p.id: p for p in result.pages},
        COUNTER,
        clusters={n.id: n for n in result.nodes},
        state=result.state.to_value(),
    )
    assert [m.id for m in history_back] == [m.id for m in history]


def test_small_pages_never_grow_the_context_when_the_only_cluster_left_it():
    """A cluster whose bookmark left the context takes small pages only at the price of a new cluster
    bookmark: evicting them 'for free' made the context bigger."""
    long = [
        m
        for i in range(6)
        for m in (
            HumanMessage(
                f"Zarko{i} keeps {i} beehives near Lake Bled{i} and sells honey in Radovljica{i}.", id=f"h{i}"
            ),
            AIMessage(f"Noted {i}.", id=f"a{i}"),
        )
    ]
    first = page_messages(long, max_tokens=150, boundary="fixed_1", bookmark_share=0.2, text_counter=COUNTER)
    (cluster,) = first.state.clusters.values()
    state = add_messages(first.apply(list(long)), [RemoveMessage(id=cluster.anchor)])
    state = add_messages(
        state,
        [HumanMessage("Summary: bees honey", id="s")]
        + [m for i in range(6, 9) for m in (HumanMessage("ok", id=f"h{i}"), AIMessage("Fine.", id=f"a{i}"))],
    )
    second = page_messages(
        state,
        max_tokens=60,
        boundary="fixed_1",
        state=first.state.to_value(),
        bookmark_share=1.0,
        text_counter=COUNTER,
    )
    assert second.tokens <= second.tokens_before


def test_a_page_waiting_for_a_cluster_joins_the_one_folding_made_in_the_same_step():
    """A resident page no bigger than its bookmark waits for a cluster to go into; the step's fold
    made one (the other evicted pages' bookmarks passed their share) only after eviction was
    over, so the page stayed and the view stayed over budget. Eviction now resumes."""
    filler = "harbor lantern museum meadow puppy oslo glacier canyon violin pottery " * 3
    history = [
        HumanMessage("Summary: violin concert velvet cobalt recipe library museum falcon quito", id="s"),
        HumanMessage(filler, id="h1"),
        AIMessage(filler, id="a1"),
        HumanMessage(
            "puppy oslo zebra pottery marathon painting concert violin lantern cobalt saffron", id="h2"
        ),
    ]
    result = page_messages(
        history, max_tokens=60, boundary="fixed_1", policy="lru", bookmark_share=0.05, text_counter=COUNTER
    )
    assert result.state.clusters
    assert not result.over_budget and result.tokens <= 60
    state = result.apply(list(history))
    pages = {p.id: p for p in result.pages}
    nodes = {n.id: n for n in result.nodes}
    assert (
        reconstruct_history(state, pages, COUNTER, clusters=nodes, state=result.state.to_value()) == history
    )


@pytest.mark.slow
def test_a_small_page_goes_into_a_cluster_only_when_that_saves_tokens():
    """Fuzz seed 299 (view mode, after a fork): a 3-token page no bigger than its bookmark went
    straight into the cluster in the view, counted as saving its 3 tokens, but the cluster's
    bookmark grew by 4: paging made the context bigger (212 -> 213). Such a page now joins
    only when the cluster bookmark grows by less than the page."""
    from tools import fuzzing as fuzz

    report = fuzz.Report()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fuzz.run_case("pure", 299, report)
    assert not [f for f in report.failures if f.invariant.startswith("paging made the context bigger")]


def test_small_pages_still_evicted() -> None:
    """Pages no smaller than their bookmark are still paged out (into a cluster) when no cluster exists yet:
    the context stays within budget unless what is protected explains it."""
    for result, *_ in pure_thread(60, max_tokens=400, boundary="fixed_1"):
        assert not result.over_budget or result.protected_tokens > 400 * 0.5, (
            f"{result.tokens} tokens > 400 with {result.protected_tokens} protected; "
            f"{len(result.state.pages)} resident pages, none evicted"
        )


def test_direct_eviction_keeps_a_pointer() -> None:
    """A page smaller than its bookmark, evicted straight into a cluster, is in the cluster right away:
    the history rebuilds losslessly after every step."""
    long = (
        "My neighbour Zarko{i} keeps {i} beehives near Lake Bled{i} since 19{i:02d}, and he sells honey "
        "every Sunday at the market in Radovljica{i}."
    )
    state, paging, pages, nodes, full = [], None, {}, {}, []
    for i in range(8):
        new = [
            HumanMessage(long.format(i=i) if i < 6 else f"ok {i}", id=f"h{i}"),
            AIMessage(f"Noted {i}.", id=f"a{i}"),
        ]
        full += new
        state = add_messages(state, new)
        result = page_messages(
            state, max_tokens=120, boundary="fixed_1", state=paging, bookmark_share=0.7, text_counter=COUNTER
        )
        state, paging = result.apply(state), result.state.to_value()
        pages.update({p.id: p for p in result.pages})
        nodes.update({n.id: n for n in result.nodes})
        rebuilt = reconstruct_history(state, pages, COUNTER, clusters=nodes, state=paging)
        assert rebuilt == full, (
            f"turn {i}: missing {[m.id for m in full if m not in rebuilt]} (evicted {result.evicted})"
        )
