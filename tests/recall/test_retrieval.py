"""Recall v5 retrieval: turns still in the context that a search ranks bring their neighbours and
are really kept by the next step; the second hop and hybrid fusion (issue 24)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingConfig, PagingState
from langmem_paging.core.state import paging_reducer, recall_delta
from langmem_paging.recall.passages import pack_hits
from langmem_paging.runtime.pager import Pager
from langmem_paging.storage.page_store import PageStore
from tests.support.scenario_helpers import step_exchanges
from tools.fuzzing.vocabulary import COUNTER

FILLER = "The water was calm, the willows were green and the boathouse smelled of tar."


def _days(n: int) -> list[list[BaseMessage]]:
    return [
        [
            HumanMessage(f"Day {i}: Mirela{i} rowed across the lake. " + FILLER, id=f"h{i}"),
            AIMessage(f"Noted day {i}.", id=f"a{i}"),
        ]
        for i in range(n)
    ]


def _ask(pager: Pager, value: dict, messages: list[BaseMessage], question: str):
    """The question, a search recall for it, and the step after (what the next model call sees)."""
    q = HumanMessage(question, id="q")
    messages = add_messages(messages, [q])
    first = pager.step(messages, value, "t")
    value, messages = first.state.to_value(), first.apply(messages)
    call = AIMessage("", tool_calls=[{"name": "recall", "args": {"query": question}, "id": "c"}], id="ac")
    answer = pager.recall(
        "t", value, query=question, call_tokens=COUNTER.count_message(call), context=messages
    )
    result = ToolMessage(answer.content, tool_call_id="c", id="r", artifact=answer.artifact)
    value = paging_reducer(
        value, recall_delta(answer.accessed, turn=answer.turn, results=["r", *answer.kept])
    )
    step = pager.step(add_messages(messages, [call, result]), value, "t")
    return answer, step


def _pager(budget: int) -> Pager:
    return Pager(
        PagingConfig(max_tokens=budget, boundary="fixed_4", policy="fifo"), PageStore(InMemoryStore())
    )


def test_a_resident_match_brings_its_neighbours_as_a_paged_hit_does():
    """A turn still in the context that matched was kept alone; the reply next to it (the answer,
    sharing no word with the question) was paged out by the step after the recall and shown
    nowhere, where the flat baseline's +-1 neighbours had it (LoCoMo "How did Melanie's son
    handle the accident?")."""
    resident = [(0.0, 5), (0.0, 5), (3.0, 5), (0.0, 5), (0.0, 5)]  # (score, tokens), context order
    packed = pack_hits([], {}, page_cost=lambda page, runs: 0, room=100, neighbours=1, resident=resident)
    assert sorted(packed.resident) == [1, 2, 3]
    assert packed.used == 15
    # no room for the neighbours: the match alone, as a hit whose window does not fit
    packed = pack_hits([], {}, page_cost=lambda page, runs: 0, room=12, neighbours=1, resident=resident)
    assert packed.resident == [2]


def test_turns_a_search_keeps_are_still_in_the_context_after_the_next_step():
    """Turns kept by a search that sat in a resident page were counted against the room, then
    evicted with their page by the next step: the room went unused and the turns were in neither
    the context nor the result."""
    pager = _pager(3000)
    value, messages = step_exchanges(pager, _days(150))
    state = PagingState.from_value(value)
    answer, step = _ask(pager, value, messages, "How many swans did Mirela count on the lake?")
    in_view = {m.id for m in step.view}
    assert answer.kept, "the scenario needs resident matches"
    assert set(answer.kept) <= in_view, sorted(set(answer.kept) - in_view)
    in_pages = {key for page in state.pages.values() for key in page.ids}
    assert not set(answer.kept) & in_pages
