"""Recall v4 packing: neighbours by rank, one passage gives way (never a page group), a second
pass widens the best hits into what is left, and a search result fills its room."""

from __future__ import annotations

import re

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingConfig, PagingState
from langmem_paging.core.records import Page
from langmem_paging.index.base import Hit
from langmem_paging.recall.passages import WIDE_HITS, pack_hits
from langmem_paging.runtime.pager import Pager
from langmem_paging.storage.page_store import PageStore
from tests.support.scenario_helpers import step_exchanges
from tools.fuzzing.oracles import recall_structure_problems
from tools.fuzzing.vocabulary import COUNTER


def _book(pages: int, size: int = 20, long: frozenset[tuple[int, int]] = frozenset()) -> dict[str, Page]:
    """`pages` pages of `size` one-token messages (`long` positions cost 50), contiguous."""

    def message(n: int, i: int) -> HumanMessage:
        return HumanMessage("x" * (50 if (n, i) in long else 1), id=f"p{n}-{i}")

    return {
        f"p{n}": Page(
            id=f"p{n}",
            messages=[message(n, i) for i in range(size)],
            bookmark="",
            keywords=[],
            token_count=size,
            boundary="fixed",
            created_turn=1,
            order=(n - 1) * size,
        )
        for n in range(1, pages + 1)
    }


def _cost(page: Page, runs) -> int:
    """A header of one token, then each message's length."""
    return 1 + sum(len(str(page.messages[i].content)) for a, b in runs for i in range(a, b))


def _shown(packed, page_id: str) -> set[int]:
    return {i for pid, runs in packed.groups if pid == page_id for a, b in runs for i in range(a, b)}


def _spread_hits(n: int) -> list[Hit]:
    """`n` hits, best first, each in a page of its own, mid-page (no windows overlap)."""
    return [Hit(f"p{k + 1}", 10, float(n - k)) for k in range(n)]


def test_neighbours_depend_on_the_rank_of_the_hit():
    n = WIDE_HITS + 5
    pages = _book(n)
    # pass 1 alone: room for the schedule exactly (the second pass has nothing to widen with)
    schedule = [5] * WIDE_HITS + [3] * (n - WIDE_HITS)
    packed = pack_hits(
        _spread_hits(n), pages, page_cost=_cost, room=sum(1 + s for s in schedule), neighbours=2
    )
    assert _shown(packed, "p1") == {8, 9, 10, 11, 12}
    assert _shown(packed, f"p{WIDE_HITS}") == {8, 9, 10, 11, 12}
    assert _shown(packed, f"p{WIDE_HITS + 1}") == {9, 10, 11}
    assert _shown(packed, f"p{n}") == {9, 10, 11}
    assert packed.hits == n


def test_a_hit_whose_window_does_not_fit_comes_alone():
    pages = _book(3)
    packed = pack_hits(_spread_hits(3), pages, page_cost=_cost, room=6 + 6 + 3, neighbours=2)
    assert _shown(packed, "p3") == {10}, packed.groups


def test_a_hit_too_long_to_fit_gives_way_alone_and_later_hits_still_go_in():
    pages = _book(4, long=frozenset({(2, 10)}))
    hits = _spread_hits(4)
    packed = pack_hits(hits, pages, page_cost=_cost, room=3 * 6, neighbours=2)
    shown = [pid for pid, _ in packed.groups]
    assert shown == ["p1", "p3", "p4"], packed.groups  # only p2's passage gave way
    assert packed.used <= 18


def test_the_second_pass_widens_the_best_hits_into_what_is_left():
    n = WIDE_HITS + 4  # the last four come with one neighbour a side in the first pass
    pages = _book(n)
    first = sum(6 if k < WIDE_HITS else 4 for k in range(n))
    packed = pack_hits(_spread_hits(n), pages, page_cost=_cost, room=first + 2, neighbours=2)
    assert _shown(packed, f"p{WIDE_HITS + 1}") == {8, 9, 10, 11, 12}, "the best narrow hit was not widened"
    assert _shown(packed, f"p{WIDE_HITS + 2}") == {9, 10, 11}
    assert packed.used == first + 2


def test_runs_already_shown_cost_nothing_and_stay():
    pages = _book(3)
    taken = {"p1": [(8, 13)]}
    packed = pack_hits(
        [Hit("p1", 10, 2.0), Hit("p2", 10, 1.0)], pages, page_cost=_cost, room=6, neighbours=2, taken=taken
    )
    assert packed.groups == [("p1", [(8, 13)]), ("p2", [(8, 13)])]
    assert packed.used == 6


def _diary(n: int) -> list[list]:
    filler = "The water was calm, the willows were green and the boathouse smelled of tar."
    return [
        [
            HumanMessage(
                f"Day {i}: Mirela{i} rowed across the lake and counted {i * 7} swans. "
                + filler * (1 + i % 3),
                id=f"h{i}",
            ),
            AIMessage(f"Noted day {i}." + " The lake again." * (i % 4), id=f"a{i}"),
        ]
        for i in range(n)
    ]


@pytest.mark.parametrize("budget", [1500, 4000, 8000])
def test_a_search_result_uses_at_least_98_percent_of_its_room(budget):
    """The final fit dropped whole page groups and only room/25 hits were read: 237 of B=4000's
    tokens stayed unused inside the room on LoCoMo dev."""
    pager = Pager(
        PagingConfig(max_tokens=budget, boundary="fixed_4", policy="fifo"), PageStore(InMemoryStore())
    )
    value, _ = step_exchanges(pager, _diary(budget // 25))
    cap = pager.room_for(PagingState.from_value(value))
    answer = pager.recall("t", value, query="How many swans did Mirela count on the lake?")
    used = COUNTER.count_text(answer.content)
    assert cap * 0.98 <= used <= cap, (used, cap)
    assert not recall_structure_problems(answer.content)
    assert len(set(re.findall(r"Day (\d+):", answer.content))) > 10


def test_bookmarks_yield_to_a_search_result_and_the_context_uses_its_budget():
    """Bookmarks held ~15% of B beside a search result that already answered, and their share
    plus the new pages' bookmarks were set aside from the room: the final context left B
    unused. Now the room counts them as folding away (the step folds them into cluster
    bookmarks as far as the result needs), so the result is larger and the context fills B."""
    from langgraph.graph.message import add_messages

    from langmem_paging.core.messages import is_bookmark
    from langmem_paging.core.state import paging_reducer, recall_delta

    budget = 3000
    pager = Pager(
        PagingConfig(max_tokens=budget, boundary="fixed_4", policy="fifo"), PageStore(InMemoryStore())
    )
    value, messages = step_exchanges(pager, _diary(150))
    state = PagingState.from_value(value)
    marks_before = sum(COUNTER.count_message(m) for m in messages if is_bookmark(m))
    assert marks_before > budget * 0.1, "the scenario needs bookmarks worth yielding"
    question = HumanMessage("How many swans did Mirela count on the lake?", id="q")
    messages = add_messages(messages, [question])
    first = pager.step(messages, value, "t")
    value, messages = first.state.to_value(), first.apply(messages)
    call = AIMessage(
        "", tool_calls=[{"name": "recall", "args": {"query": question.content}, "id": "c"}], id="ac"
    )
    call_tokens = COUNTER.count_message(call)
    room = pager.room_for(PagingState.from_value(value), call_tokens=call_tokens)
    state = PagingState.from_value(value)
    assert room > budget - state.protected - call_tokens, "the bookmarks' tokens go to the result"
    answer = pager.recall("t", value, query=question.content, call_tokens=call_tokens, context=messages)
    result = ToolMessage(answer.content, tool_call_id="c", id="r", artifact=answer.artifact)
    value = paging_reducer(
        value, recall_delta(answer.accessed, turn=answer.turn, results=["r", *answer.kept])
    )
    step = pager.step(add_messages(messages, [call, result]), value, "t")
    assert any(m.id == "r" for m in step.view)
    assert budget * 0.95 <= step.tokens <= budget, step.tokens
    marks_after = sum(COUNTER.count_message(m) for m in step.view if is_bookmark(m))
    assert marks_after < marks_before * 0.8, (marks_before, marks_after)


def test_a_second_hop_finds_what_shares_words_with_the_first_hits_not_the_question():
    """The other half of a multi-hop answer shares words with the first half, not with the
    question: a follow-up query from the first hits' distinctive terms fills the room they left."""
    chatter = [
        f"Day {i}: the weather was mild and the bakery on Tulip street sold {i} loaves." for i in range(60)
    ]
    chatter[10] = "Day 10: Mirela adopted a greyhound named Bolt from the shelter."
    chatter[45] = "Day 45: Bolt won the regional sprint at Lipica racecourse, beating forty dogs."
    pager = Pager(
        PagingConfig(max_tokens=1500, boundary="fixed_4", policy="fifo"), PageStore(InMemoryStore())
    )
    value, _ = step_exchanges(
        pager,
        [[HumanMessage(text, id=f"h{i}"), AIMessage("Nice.", id=f"a{i}")] for i, text in enumerate(chatter)],
    )
    answer = pager.recall("t", value, query="What has Mirela adopted?")
    assert "Mirela adopted a greyhound" in answer.content
    assert "Lipica racecourse" in answer.content, answer.content
