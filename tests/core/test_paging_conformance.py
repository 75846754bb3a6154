"""Invariants every eviction policy and every boundary strategy must keep (the conformance suite)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langmem_paging import POLICIES, is_bookmark, page_messages, reconstruct_history
from langmem_paging.core.messages import METADATA_KEY, is_user_turn
from tests.support.conversations import conversation
from tests.support.harness import COUNTER, assert_valid_chat, model_call_points, replay

BOUNDARIES = ["fixed_3", "fixed_20", "tokens_120", "exchange", "session", "topic_shift"]


def _assert_lossless(run, history):
    rebuilt = reconstruct_history(run.state, run.pages, COUNTER, clusters=run.nodes, state=run.paging)
    assert rebuilt == history


@pytest.mark.slow
@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_replay_is_lossless_within_budget_and_valid(policy, boundary):
    history = conversation(60, seed=7)
    run = replay(history, max_tokens=400, boundary=boundary, policy=policy)

    assert run.pages, "the budget is far below the history: something must be paged"
    _assert_lossless(run, history)
    for result in run.steps:
        assert result.tokens <= 400 or result.over_budget
        if result.over_budget:  # only when what nothing may evict is itself over budget
            assert result.protected_tokens > 400 * 0.5
        assert_valid_chat(result.view)
    for page in run.pages.values():
        assert_valid_chat(page.messages) if page.kind == "page" else None
        assert not isinstance(page.messages[0], ToolMessage) or page.kind == "tool_result"
    assert isinstance(run.state[0], SystemMessage)


@pytest.mark.slow
@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_paging_is_deterministic(policy, boundary):
    history = conversation(25, seed=3)
    first = replay(history, max_tokens=300, boundary=boundary, policy=policy)
    second = replay(history, max_tokens=300, boundary=boundary, policy=policy)
    assert first.state == second.state and first.paging == second.paging
    assert [p.bookmark for p in first.pages.values()] == [p.bookmark for p in second.pages.values()]


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_never_evicts_system_pinned_or_newest_user_message(policy):
    history = conversation(20, seed=1)
    pinned = HumanMessage(
        "Remember: my name is Ada.", id="pin", additional_kwargs={METADATA_KEY: {"pinned": True}}
    )
    history.insert(3, pinned)
    result = page_messages(
        history, max_tokens=50, boundary="fixed_2", policy=policy, token_counter=len, text_counter=COUNTER
    )
    ids = [m.id for m in result.view]
    assert "sys" in ids and "pin" in ids and history[-2].id in ids  # newest user message: h19
    assert result.view[ids.index("pin")] is pinned


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_an_unanswered_tool_call_is_answered_with_an_error_and_paging_goes_on(policy):
    history = conversation(30, seed=2, tools=False)
    dangling = AIMessage("", tool_calls=[{"name": "lookup", "args": {}, "id": "open"}], id="dangling")
    history = history[:5] + [dangling] + history[5:]
    run = replay(history, max_tokens=120, boundary="fixed_2", policy=policy)
    rebuilt = [m.id for m in reconstruct_history(run.state, run.pages, clusters=run.nodes, state=run.paging)]
    assert rebuilt[rebuilt.index("dangling") + 1] == "repair-open"  # answered with an error: a valid chat
    late = list(run.steps[-10:])
    assert all(r.tokens <= 120 for r in late), "paging must go on around the unanswered call"
    assert any(r.evicted for r in late)


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_bookmarks_never_change_and_pages_are_contiguous_and_disjoint(policy):
    history = conversation(40, seed=5)
    run = replay(history, max_tokens=350, boundary="fixed_4", policy=policy)
    seen = {}
    for result in run.steps:
        for message in result.view:
            if (
                is_bookmark(message)
                and METADATA_KEY in message.additional_kwargs
                and "bookmark" in message.additional_kwargs[METADATA_KEY]
            ):
                assert seen.setdefault(message.id, message.content) == message.content
    order = [m.id for m in history]
    spans = sorted(
        (order.index(p.messages[0].id), order.index(p.messages[-1].id))
        for p in run.pages.values()
        if p.kind == "page"
    )
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert all(
        b - a + 1 == len(p.messages)
        for (a, b), p in zip(
            spans,
            sorted(
                (p for p in run.pages.values() if p.kind == "page"),
                key=lambda p: order.index(p.messages[0].id),
            ),
            strict=False,
        )
    )


def test_low_water_mark_pages_in_steps():
    history = conversation(60, seed=9, tools=False)
    run = replay(history, max_tokens=600, low_water_tokens=400, boundary="fixed_10", policy="fifo")
    paging_steps = [r for r in run.steps if r.evicted]
    assert 1 < len(paging_steps) < len(run.steps) / 3
    assert all(r.tokens <= 400 for r in paging_steps)


def test_under_budget_changes_nothing():
    history = conversation(3, seed=0)
    result = page_messages(history, max_tokens=10_000, text_counter=COUNTER)
    assert result.view == history and not result.pages and not result.updates


def test_inputs_are_never_mutated():
    history = conversation(30, seed=4)
    snapshot = [m.model_copy(deep=True) for m in history]
    page_messages(history, max_tokens=200, boundary="fixed_3", text_counter=COUNTER)
    assert history == snapshot


_texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)


@st.composite
def conversations(draw):
    """Random chats: user turns, parallel tool groups (some malformed), replies, odd unicode."""
    out = [SystemMessage("sys", id="sys")]
    for turn in range(draw(st.integers(1, 25))):
        out.append(HumanMessage(draw(_texts), id=f"h{turn}"))
        for k in range(draw(st.integers(0, 2))):
            n_calls = draw(st.integers(1, 3))
            calls = [
                {"name": "f", "args": {"x": draw(_texts)}, "id": f"c{turn}{k}{j}"} for j in range(n_calls)
            ]
            if draw(st.booleans()) and k == 0:
                bad = [
                    {
                        "name": "f",
                        "args": "{bad",
                        "id": f"bad{turn}",
                        "error": "bad json",
                        "type": "invalid_tool_call",
                    }
                ]
                out.append(
                    AIMessage(draw(_texts), tool_calls=calls, invalid_tool_calls=bad, id=f"t{turn}{k}")
                )
                out.append(
                    ToolMessage("Error: bad json", tool_call_id=f"bad{turn}", id=f"rb{turn}", status="error")
                )
            else:
                out.append(AIMessage(draw(_texts), tool_calls=calls, id=f"t{turn}{k}"))
            out += [ToolMessage(draw(_texts), tool_call_id=c["id"], id=f"r{c['id']}") for c in calls]
        out.append(AIMessage(draw(_texts), id=f"a{turn}"))
    return out


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    history=conversations(),
    max_tokens=st.integers(30, 400),
    boundary=st.sampled_from(BOUNDARIES),
    policy=st.sampled_from(sorted(POLICIES)),
)
def test_invariants_hold_for_random_conversations(history, max_tokens, boundary, policy):
    run = replay(history, max_tokens=max_tokens, boundary=boundary, policy=policy)
    _assert_lossless(run, history)
    for result in run.steps:
        assert_valid_chat(result.view)
        if not result.over_budget:
            assert result.tokens <= max_tokens
        assert is_user_turn(result.view[max(i for i, m in enumerate(result.view) if is_user_turn(m))])


def test_model_call_points_cover_the_conversation():
    history = conversation(5, seed=0)
    assert model_call_points(history)[-1] <= len(history)
