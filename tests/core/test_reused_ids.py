"""A new message reusing the id of a paged message, a bookmark or a cluster bookmark is shown, and
what it displaced stays in the history."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph.message import add_messages

from langmem_paging import page_messages, reconstruct_history
from tests.support.conversations import town_turns as _turns
from tests.support.harness import COUNTER
from tests.support.scenario_helpers import FACTS, scripted_agent


def test_a_new_message_reusing_an_evicted_message_id_is_shown():
    history = _turns(10) + [HumanMessage("now", id="n")]
    first = page_messages(
        history,
        max_tokens=12,
        boundary="fixed_2",
        token_counter=len,
        text_counter=COUNTER,
        bookmark_share=1.0,
    )
    evicted = first.evicted[0]
    page_ids = list(first.evicted_ids[evicted])
    reused = HumanMessage("Edited text that reuses an old id.", id=page_ids[1])  # not the bookmark's id
    later = page_messages(
        [*first.view, AIMessage("ok", id="o"), reused],
        max_tokens=40,
        state=first.state.to_value(),
        boundary="fixed_2",
        token_counter=len,
        text_counter=COUNTER,
        bookmark_share=1.0,
    )
    assert any(m.content == reused.content for m in later.view)


def test_a_message_that_replaces_a_bookmark_is_shown_and_the_page_stays_recallable():
    history = _turns(14) + [HumanMessage("now", id="n")]
    first = page_messages(
        history,
        max_tokens=14,
        boundary="fixed_2",
        token_counter=len,
        text_counter=COUNTER,
        bookmark_share=1.0,
    )
    page_id, shown = next(iter(first.state.shown.items()))
    # a client sends a message with the id the bookmark has (its page's first message id)
    replaced = [
        HumanMessage("An edit of the first question.", id=m.id) if m.id == shown.anchor else m
        for m in first.view
    ]
    later = page_messages(
        [*replaced, AIMessage("ok", id="o"), HumanMessage("go on", id="g")],
        max_tokens=40,
        state=first.state.to_value(),
        boundary="fixed_2",
        token_counter=len,
        text_counter=COUNTER,
        bookmark_share=1.0,
    )
    assert any(m.content == "An edit of the first question." for m in later.view)
    assert later.state.owns("p", int(page_id[1:])) and page_id not in later.state.pages  # still recallable


def _reuse_a_cluster_anchor(topics: tuple[str, ...]) -> None:
    """add_messages puts a new message whose id is a cluster bookmark's anchor in the bookmark's
    place: the next step took that place for a fold and deleted the new message."""
    state, paging, pages, nodes, full = [], None, {}, {}, []

    def step():
        nonlocal state, paging
        result = page_messages(
            state, max_tokens=320, boundary="fixed_2", bookmark_share=0.2, state=paging, text_counter=COUNTER
        )
        state, paging = result.apply(state), result.state.to_value()
        pages.update({p.id: p for p in result.pages})
        nodes.update({n.id: n for n in result.nodes})
        return result

    for i in range(12):
        topic = topics[i * len(topics) // 12]
        full.append(HumanMessage(f"My neighbour Zarko{i} keeps {i} {topic}{i} since 19{i:02d}.", id=f"h{i}"))
        state = add_messages(state, full[-1:])
        before = step()
        full.append(AIMessage("Noted.", id=f"a{i}"))
        state = add_messages(state, full[-1:])
    assert len(before.state.clusters) == len(topics) and any(
        c.anchor == "h0" for c in before.state.clusters.values()
    )
    state = add_messages(state, [HumanMessage("A new question reusing an old id.", id="h0")])
    result = step()
    assert any(m.content == "A new question reusing an old id." for m in result.view)
    history = reconstruct_history(state, pages, COUNTER, clusters=nodes, state=paging)
    assert {m.id for m in full} <= {m.id for m in history}
    assert sum(m.content == "A new question reusing an old id." for m in history) == 1


def test_a_new_message_reusing_a_cluster_bookmarks_id_is_kept_and_the_cluster_too():
    """Two clusters: the displaced one merges into the other, still shown."""
    _reuse_a_cluster_anchor(("beehives near Lake Bled", "sailboats in the harbour of Piran"))


def test_a_new_message_reusing_the_only_cluster_bookmarks_id_keeps_the_cluster():
    _reuse_a_cluster_anchor(("beehives near Lake Bled",))


def test_the_only_cluster_keeps_a_place_when_a_new_message_takes_its_id():
    """With no other cluster to merge into, a cluster whose bookmark's id a new message took was
    dropped: its pages were out of reach of the checkpoint. It now takes a page bookmark's place."""

    def turns(a, b):
        return [
            m
            for i in range(a, b)
            for m in (
                HumanMessage(
                    f"Zarko{i} keeps {i} beehives near Lake Bled{i} and sells honey in Radovljica{i}.",
                    id=f"h{i}",
                ),
                AIMessage(f"Noted {i}.", id=f"a{i}"),
            )
        ]

    options = {"max_tokens": 150, "boundary": "fixed_1", "text_counter": COUNTER}
    first = page_messages(turns(0, 6), bookmark_share=0.2, **options)
    (cluster,) = first.state.clusters.values()
    state = add_messages(first.apply(turns(0, 6)), turns(6, 10))
    second = page_messages(state, state=first.state.to_value(), bookmark_share=1.0, **options)
    assert second.state.shown
    new = HumanMessage("A new question reusing an old id.", id=cluster.anchor)
    state = add_messages(second.apply(state), [new])
    third = page_messages(state, state=second.state.to_value(), bookmark_share=1.0, **options)
    state = third.apply(state)
    assert new in state
    pages = {p.id: p for r in (first, second, third) for p in r.pages}
    nodes = {n.id: n for r in (first, second, third) for n in r.nodes}
    history = reconstruct_history(state, pages, COUNTER, clusters=nodes, state=third.state.to_value())
    assert {m.id for m in turns(0, 10)} <= {m.id for m in history}


@pytest.mark.parametrize("mode", ["replace", "view"])
def test_reused_id_visible(mode: str) -> None:
    """A new message whose id equals an evicted message's id reaches the model."""
    agent, _paging, model = scripted_agent(500, mode=mode, boundary="fixed_2")
    config = {"configurable": {"thread_id": "t"}}
    for i in range(12):
        agent.invoke({"messages": [HumanMessage(FACTS[i], id=f"h{i}")]}, config)
    agent.invoke({"messages": [HumanMessage("Brand new question with a reused id", id="h0")]}, config)
    assert any(m.content == "Brand new question with a reused id" for m in model.prompts[-1]), (
        "the model did not receive the new message whose id was reused"
    )


def test_a_message_taking_a_stand_ins_id_past_the_budget_is_named():
    """Correctness v5, bug 6: a message that took a bookmark's id is kept the step it arrives (the
    model sees it once); when that passes the budget, the step names it and says why, and the
    warning says what nothing may evict passes the budget, naming it."""
    import warnings

    from langgraph.store.memory import InMemoryStore

    from langmem_paging import Pager, PageStore, PagingConfig

    pager = Pager(PagingConfig(max_tokens=300, boundary="fixed_2"), PageStore(InMemoryStore()))
    messages, state = [], {}
    for i in range(8):
        messages = add_messages(messages, [HumanMessage(FACTS[i] * 3, id=f"h{i}")])
        result = pager.step(messages, state, "t")
        messages = add_messages(result.apply(messages), [AIMessage("Noted.", id=f"a{i}")])
        state = result.state.to_value()
    stand_ins = [*result.state.shown.values(), *result.state.clusters.values()]
    anchor = stand_ins[0].anchor
    long = HumanMessage("An edit of the first question, much longer now. " * 30, id=anchor)
    messages = add_messages(messages, [long, HumanMessage("go on", id="g")])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        later = pager.step(messages, state, "t")

    assert later.over_budget and later.protected_tokens > 300
    named = {p.ids[0]: p for p in later.protected}
    assert named[anchor].why == "it took a stand-in's id this step"
    assert named["g"].why == "the newest user message"
    assert sum(p.tokens for p in later.protected) <= later.protected_tokens
    text = " ".join(str(w.message) for w in caught)
    assert "more than the budget" in text and f"{anchor}: {named[anchor].tokens} tokens" in text, text
