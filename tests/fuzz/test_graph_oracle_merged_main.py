"""Fuzzer, graph mode, seeds 22 and 27 on the merged main of Correctness v5 (each branch had passed on
its own): two oracles that judged the library by less than it knows. The library is unchanged.

- Seed 27: two recall calls of one message asked for a page of an abandoned branch. The first said
  "No such page"; the second, as the library answers every id a sibling call serves, pointed to
  that call ("p4: in the result of your other recall call (...), not repeated."). The oracle wanted
  "No such page" in each result that asked for the id.
- Seed 22 (view mode): the app sent ``REMOVE_ALL_MESSAGES`` keeping a user's message that carried a
  copied ``{"cluster": "c1"}`` mark. The oracle rebuilt what the app kept without the paging state,
  so it expanded the user's message into cluster c1's pages and called the history lossy.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langmem_paging import PagingState
from langmem_paging.core.messages import METADATA_KEY
from langmem_paging.recall.service import Served
from tests.fuzz.graph_case import graph_case
from tools.fuzzing import Report
from tools.fuzzing.graph import GraphCase
from tools.fuzzing.report import FuzzFailure

THREAD = "g27-0"


def _case(mode: str, max_tokens: int) -> tuple[GraphCase, Report]:
    case, report = graph_case(27, THREAD, "zt27x", mode=mode, max_tokens=max_tokens, boundary="fixed_2")
    case.plan_turn = lambda thread: setattr(case, "plan", [])  # the model answers at once
    return case, report


def test_a_pointer_to_the_sibling_call_serving_an_abandoned_page_passes_the_graph_oracle():
    case, report = _case("replace", 500)
    case.abandoned[THREAD] = {"p4"}
    state = PagingState().to_value()  # the branch owns no p4
    kwargs = {"page_ids": ["p4"], "served": {"p4": Served("call_first", 400)}}
    answer = case.paging.pager.recall(THREAD, state, store=case.store, **kwargs)
    assert answer.content == "p4: in the result of your other recall call (call_first), not repeated."

    case.check_recall(THREAD, state, kwargs, answer)
    assert not report.failures

    # the oracle still fails a pointer to a call that does not serve the id
    kwargs["served"] = {"p4": Served("call_other", 400)}
    with pytest.raises(FuzzFailure):
        case.check_recall(THREAD, state, kwargs, answer)
    assert [f.invariant for f in report.failures] == ["abandoned branch page visible (graph)"]


def test_a_kept_user_message_with_a_copied_mark_is_kept_as_the_users_by_the_graph_oracle():
    case, report = _case("view", 300)
    words = case.words[THREAD]
    inputs: list = []
    case.user_input = lambda thread, values: (list(inputs), False)
    for n in range(4):
        inputs[:] = [HumanMessage(words.text(40), id=f"h-{THREAD}-h{n}")]
        case.turn(THREAD)
    assert case.oracle.get(THREAD, "p1") is not None, "no page formed: the test cannot reach the check"
    # seed 22 copied {"cluster": "c1"}; a copied bookmark mark takes the same path (`_shows_a_page`)
    copied = HumanMessage(
        words.text(8), id=f"h-{THREAD}-copied", additional_kwargs={METADATA_KEY: {"bookmark": "p1"}}
    )
    inputs[:] = [copied]
    case.turn(THREAD)
    assert not report.failures

    state = case.state_of(THREAD).values["messages"]
    kept = [m for m in state if m.id == copied.id] + [state[-1]]  # the user's message and the answer
    inputs[:] = [
        RemoveMessage(id=REMOVE_ALL_MESSAGES),
        HumanMessage("Summary: so far", id="sum-1"),
        *kept,
        HumanMessage(words.text(5), id=f"h-{THREAD}-after"),
    ]
    case.user_input = lambda thread, values: (list(inputs), True)
    case.turn(THREAD)
    assert not report.failures, f"{report.failures[0].invariant}: {report.failures[0].detail}"
    assert [m.id for m in case.rebuild(THREAD, case.state_of(THREAD).values)][:4] == [
        "sum-1",
        copied.id,
        kept[1].id,
        f"h-{THREAD}-after",
    ]
