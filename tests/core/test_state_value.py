"""The checkpointed channel value carries what decides the view and nothing the view or the store
already holds (issue 23: at most half the messages channel at every checkpoint, B=900 included):
keys and entry fields at their default are left out, a cold page's bookmark and a cluster's
bookmark are the text of the message at their anchor. A page that turns warm keeps its bookmark
while it is warm, so it shows the same bookmark when it turns cold again."""

from __future__ import annotations

import json

import pytest
from langgraph.graph.message import add_messages

from langmem_paging import page_messages, paging_reducer
from langmem_paging.core.messages import METADATA_KEY
from langmem_paging.core.state import PagingState, recall_delta
from langmem_paging.strategies.tiers import UtilityScoring
from tests.support.conversations import beehive_notes
from tests.support.harness import replay


def _marked(message, key: str):
    return message.additional_kwargs.get(METADATA_KEY, {}).get(key)


def test_cold_bookmarks_and_cluster_bookmarks_are_left_to_the_view():
    run = replay(beehive_notes(80), max_tokens=900, boundary="fixed_2")
    value = run.paging
    assert value["shown"] and value["clusters"], "the thread was paged and folded"
    assert all("bookmark" not in e for e in value["shown"].values())
    assert all("text" not in e for e in value["clusters"].values())
    assert all(k not in e for e in value["shown"].values() for k in ("count", "tier", "weight"))
    shown = {m.id: m.content for m in run.state if _marked(m, "bookmark") or _marked(m, "cluster")}
    for pid, entry in value["shown"].items():  # what the checkpoint leaves out, the view shows
        if entry["anchor"] in shown:
            assert shown[entry["anchor"]] == run.pages[pid].bookmark
    for entry in value["clusters"].values():
        assert shown[entry["anchor"]].startswith("[c")


def test_keys_at_their_default_are_left_out_and_read_back():
    run = replay(beehive_notes(40), max_tokens=500, boundary="fixed_2")
    value = run.paging
    assert {"warned", "skeleton", "front", "recalled", "touched", "stats"}.isdisjoint(value)
    state = PagingState.from_value(value)
    assert state.warned is False and state.skeleton is None and state.stats == {}
    assert state.to_value() == value  # read and written again: the same value


def test_a_version_2_value_with_every_key_reads_as_before():
    run = replay(beehive_notes(40), max_tokens=500, boundary="fixed_2")
    state = PagingState.from_value(run.paging)
    for pid, entry in state.shown.items():
        entry.bookmark = run.pages[pid].bookmark
    old = {**state._full_value(), "v": 2}  # what 0.4.0's earlier commits wrote: every key
    old["shown"] = {pid: {**e, "count": 0, "tier": "cold", "weight": 1.0} for pid, e in old["shown"].items()}
    read = PagingState.from_value(old)
    assert read.shown.keys() == state.shown.keys() and read.next == state.next and read.spans == state.spans
    assert read.to_value() == {**run.paging, "v": 3}


def test_a_cold_page_that_turns_warm_then_cold_shows_its_own_bookmark():
    """A cold page's checkpointed entry has no bookmark: recalled, it turns warm and takes the
    bookmark the view shows (its warm entry keeps it); once other pages are recalled more, it turns
    cold and shows that bookmark again."""
    history, view, value, pages = beehive_notes(40), [], None, {}
    tiers: list[dict[str, str]] = []

    def step(new):
        nonlocal view, value
        view = add_messages(view, new)
        result = page_messages(
            view, max_tokens=900, state=value, pages=pages, boundary="fixed_2", tiers=UtilityScoring(tau=2.0)
        )
        pages.update({p.id: p for p in result.pages})
        view, value = result.apply(view), result.state.to_value()
        tiers.append({pid: e.get("tier", "cold") for pid, e in value["shown"].items()})

    for i in range(0, 44, 2):
        step(history[i : i + 2])
    page = next(pid for pid, tier in tiers[-1].items() if tier == "cold")
    assert "bookmark" not in value["shown"][page]
    value = paging_reducer(value, recall_delta([page] * 3, turn=PagingState.from_value(value).turn))
    step(history[44:46])
    assert tiers[-1][page] == "warm" and value["shown"][page]["bookmark"] == pages[page].bookmark
    others = [pid for pid in value["shown"] if pid != page]
    value = paging_reducer(value, recall_delta(others * 10, turn=PagingState.from_value(value).turn))
    step(history[46:48])
    assert tiers[-1][page] == "cold"
    (shown,) = [m for m in view if _marked(m, "bookmark") == page]
    assert shown.content == pages[page].bookmark


@pytest.mark.slow
@pytest.mark.filterwarnings(
    "ignore::langmem_paging.PagingWarning"
)  # the benchmark pages at small budgets by design
def test_the_scale_benchmark_checkpoint_at_b900_is_at_most_half_the_messages_channel(tmp_path):
    """Issue 23's measure (`tools/bench_scale.py --only weight`), on its first 1,000 messages: pages of
    20 messages at B=900 leave a view of a few bookmarks and one short page. Before, the cold
    bookmarks, the cluster bookmarks' text and the keys at their default made the checkpoint up to
    0.86x the messages channel past its first 20 checkpoints."""
    from tests.evals.test_bench_scale import load_bench

    out = tmp_path / "weight.json"
    load_bench().main(["--only", "weight", "--sizes", "1000", "--weight-budgets", "900", "--json", str(out)])
    (row,) = json.loads(out.read_text())["weight"]
    assert row["history_messages"] >= 1000
    assert row["ratio_max_settled"] <= 0.5, row
