"""Invariants every eviction policy and every boundary strategy must keep."""

from __future__ import annotations

import copy

import pytest
from conversations import conversation, model_call_points
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph.message import add_messages

from langmem_paging import POLICIES, TokenCounter, is_bookmark, page_messages, reconstruct_history
from langmem_paging.messages import METADATA_KEY, is_user_turn

BOUNDARIES = ["fixed_3", "fixed_20", "tokens_120", "exchange", "session", "topic_shift"]
COUNTER = TokenCounter()


def replay(messages, *, max_tokens, boundary, policy, low_water_tokens=None, token_counter=None):
    """Drive paging the way an agent does (replace mode), checking invariants at every model call."""
    state, ledger, pages = [], None, {}
    steps = []
    previous = 0
    for point in model_call_points(messages):
        state = add_messages(state, messages[previous:point])
        previous = point
        before = copy.deepcopy(state)
        result = page_messages(
            state, max_tokens=max_tokens, low_water_tokens=low_water_tokens, ledger=ledger,
            boundary=boundary, policy=policy, token_counter=token_counter, text_counter=COUNTER,
        )
        assert state == before, "page_messages mutated its input"
        for page in result.pages:
            assert page.id not in pages, "page id reused"
            pages[page.id] = page
        state = add_messages(state, result.updates)
        assert state == result.view, "updates must turn state into the view"
        ledger = result.ledger
        steps.append(result)
    state = add_messages(state, messages[previous:])
    return state, pages, steps


def _assert_tool_pairs_whole(messages):
    for i, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            owner = next(m for m in reversed(messages[:i]) if not isinstance(m, ToolMessage))
            assert isinstance(owner, AIMessage) and message.tool_call_id in {c["id"] for c in owner.tool_calls}


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_replay_is_lossless_within_budget_and_keeps_tool_pairs(policy, boundary):
    history = conversation(40, seed=7)
    state, pages, steps = replay(history, max_tokens=400, boundary=boundary, policy=policy)

    assert pages, "the budget is far below the history: something must be paged"
    assert reconstruct_history(state, pages, COUNTER) == history
    for result in steps:
        if result.over_budget:
            # Only allowed when nothing is left to evict before the current turn.
            newest = max(i for i, m in enumerate(result.view) if is_user_turn(m))
            assert all(is_bookmark(m) or isinstance(m, SystemMessage) for m in result.view[:newest])
        else:
            assert result.tokens <= 400
        _assert_tool_pairs_whole(result.view)
    for page in pages.values():
        _assert_tool_pairs_whole(page.messages)
        assert not isinstance(page.messages[0], ToolMessage)
    assert isinstance(state[0], SystemMessage)


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_paging_is_deterministic(policy, boundary):
    history = conversation(25, seed=3)
    first = replay(history, max_tokens=300, boundary=boundary, policy=policy)
    second = replay(history, max_tokens=300, boundary=boundary, policy=policy)
    assert first[0] == second[0]
    assert [p.bookmark for p in first[1].values()] == [p.bookmark for p in second[1].values()]


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_never_evicts_system_pinned_or_newest_user_message(policy):
    history = conversation(20, seed=1)
    pinned = HumanMessage("Remember: my name is Ada.", id="pin",
                          additional_kwargs={METADATA_KEY: {"pinned": True}})
    history.insert(3, pinned)
    result = page_messages(history, max_tokens=50, boundary="fixed_2", policy=policy, token_counter=len,
                           text_counter=COUNTER)
    ids = [m.id for m in result.view]
    assert "sys" in ids and "pin" in ids and history[-2].id in ids  # newest user message: h19
    assert result.view[ids.index("pin")] is pinned


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_unanswered_tool_call_is_never_paged(policy):
    history = conversation(10, seed=2, tools=False)
    dangling = AIMessage("", tool_calls=[{"name": "lookup", "args": {}, "id": "open"}], id="dangling")
    history = history[:5] + [dangling] + history[5:]
    result = page_messages(history, max_tokens=4, boundary="fixed_1", policy=policy, token_counter=len,
                           text_counter=COUNTER)
    view_ids = [m.id for m in result.view]
    assert "dangling" in view_ids
    assert all(m.id in view_ids for m in history[view_ids.index("dangling"):] if not is_bookmark(m))


def test_the_cut_only_moves_forward_and_bookmarks_never_change():
    history = conversation(40, seed=5)
    _, pages, steps = replay(history, max_tokens=350, boundary="fixed_4", policy="fifo")
    seen = {}
    for result in steps:
        for message in result.view:
            if is_bookmark(message):
                assert seen.setdefault(message.id, message.content) == message.content
    # Pages are contiguous, disjoint and in history order.
    order = [m.id for m in history]
    spans = sorted((order.index(p.messages[0].id), order.index(p.messages[-1].id)) for p in pages.values())
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))


def test_low_water_mark_pages_in_steps():
    history = conversation(60, seed=9, tools=False)
    _, _, steps = replay(history, max_tokens=600, low_water_tokens=400, boundary="fixed_10", policy="fifo")
    paging_steps = [r for r in steps if r.pages]
    assert 1 < len(paging_steps) < len(steps) / 3
    assert all(r.tokens <= 400 for r in paging_steps)


def test_under_budget_changes_nothing():
    history = conversation(3, seed=0)
    result = page_messages(history, max_tokens=10_000, text_counter=COUNTER)
    assert result.view == history and not result.pages and not result.updates


def test_messages_without_ids_are_rejected_with_a_clear_message():
    with pytest.raises(ValueError, match=r"messages\[0\] has no `id`"):
        page_messages([HumanMessage("hi")], max_tokens=10)


_texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)


@st.composite
def conversations(draw):
    """Random chats: user turns, parallel tool groups, replies, odd unicode."""
    out = [SystemMessage("sys", id="sys")]
    for turn in range(draw(st.integers(1, 25))):
        out.append(HumanMessage(draw(_texts), id=f"h{turn}"))
        for k in range(draw(st.integers(0, 2))):
            n_calls = draw(st.integers(1, 3))
            calls = [{"name": "f", "args": {"x": draw(_texts)}, "id": f"c{turn}{k}{j}"} for j in range(n_calls)]
            out.append(AIMessage(draw(_texts), tool_calls=calls, id=f"t{turn}{k}"))
            out += [ToolMessage(draw(_texts), tool_call_id=c["id"], id=f"r{c['id']}") for c in calls]
        out.append(AIMessage(draw(_texts), id=f"a{turn}"))
    return out


@settings(max_examples=60, deadline=None)
@given(
    history=conversations(),
    max_tokens=st.integers(20, 400),
    boundary=st.sampled_from(BOUNDARIES),
    policy=st.sampled_from(sorted(POLICIES)),
)
def test_invariants_hold_for_random_conversations(history, max_tokens, boundary, policy):
    state, pages, steps = replay(history, max_tokens=max_tokens, boundary=boundary, policy=policy)
    assert reconstruct_history(state, pages, COUNTER) == history
    for result in steps:
        _assert_tool_pairs_whole(result.view)
        if not result.over_budget:
            assert result.tokens <= max_tokens
        assert is_user_turn(result.view[max(i for i, m in enumerate(result.view) if is_user_turn(m))])
