"""Removals and rewrites of a paged thread (`RemoveMessage`, ``REMOVE_ALL_MESSAGES``): the thread goes
on and the rebuilt history keeps the rewritten order, without the removed history."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from langmem_paging import page_messages, reconstruct_history
from tests.support.conversations import town_turns as _turns
from tests.support.harness import COUNTER


def test_removing_a_message_of_a_formed_resident_page_does_not_brick_the_thread():
    history = _turns(20)
    first = page_messages(
        history + [HumanMessage("now", id="n")],
        max_tokens=30,
        low_water_tokens=28,
        boundary="fixed_4",
        token_counter=len,
        text_counter=COUNTER,
        bookmark_share=1.0,
    )
    resident = next(iter(first.state.pages.values()))
    state = [*first.view]
    state = [m for m in state if m.id != resident.ids[1]]  # RemoveMessage of one message of it
    later = page_messages(
        [*state, AIMessage("ok", id="o"), *_turns(6, start=20)],
        max_tokens=30,
        state=first.state.to_value(),
        boundary="fixed_4",
        token_counter=len,
        text_counter=COUNTER,
        bookmark_share=1.0,
    )
    assert later.tokens <= 30
    assert resident.ids[1] not in {k for p in later.state.pages.values() for k in p.ids}


def test_reconstruct_history_keeps_the_order_of_a_rewritten_list():
    """B7: after REMOVE_ALL_MESSAGES put a summary before the kept messages, reconstruct_history
    sorted the summary (numbered last) after them, even with nothing paged out."""
    kept = [HumanMessage("q1", id="h1"), AIMessage("a1", id="a1")]
    first = page_messages(kept, max_tokens=1000, text_counter=COUNTER)
    messages = add_messages(
        kept, [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("Summary", id="s"), *kept]
    )
    messages = add_messages(messages, [HumanMessage("q2", id="h2")])
    result = page_messages(messages, max_tokens=1000, state=first.state, text_counter=COUNTER)
    rebuilt = reconstruct_history(result.view, {}, COUNTER, state=result.state)
    assert [m.id for m in rebuilt] == ["s", "h1", "a1", "h2"]


def test_remove_all_drops_the_removed_historys_clusters():
    """B11: after REMOVE_ALL_MESSAGES the removed history's cluster roots merged into one another
    and into the next cluster: deleted history came back behind a bookmark and in the rebuild."""
    options = {"max_tokens": 200, "boundary": "fixed_2", "bookmark_share": 0.05, "text_counter": COUNTER}
    messages, state, pages, nodes = [], None, {}, {}

    def step(messages, state):
        result = page_messages(messages, state=state, **options)
        pages.update({p.id: p for p in result.pages})
        nodes.update({n.id: n for n in result.nodes})
        return result.apply(messages), result.state.to_value()

    for i in range(12):
        fact = f"My neighbour Zarko{i} keeps {i} beehives near Lake Bled{i} since 19{i:02d}."
        messages, state = step(add_messages(messages, [HumanMessage(fact, id=f"h{i}")]), state)
        messages = add_messages(messages, [AIMessage(f"Noted {i}.", id=f"a{i}")])
    assert state["clusters"]
    summary = HumanMessage(
        "Summary: the user told me about " + "neighbours who keep bees near Lake Bled, " * 14, id="s"
    )
    question = HumanMessage(
        "Now tell me about " + "glaciers and meltwater lakes in the Julian Alps, " * 6, id="q"
    )
    messages, state = step(
        add_messages(messages, [RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, question]), state
    )
    rebuilt = reconstruct_history(messages, pages, COUNTER, clusters=nodes, state=state)
    assert [m.id for m in rebuilt] == ["s", "q"]


def test_a_summary_put_first_by_a_rewrite_rebuilds_first_once_paged():
    """``REMOVE_ALL_MESSAGES``, a summary, then the kept messages (what SummarizationMiddleware
    does): the summary got the next history ordinal, after the kept messages' ordinals, so once
    it was paged the rebuilt history had it after them. It is now numbered below them."""
    question = HumanMessage(
        "chess glacier falcon quito falcon marathon orchard falcon lantern concert harvest "
        "adoption bicycle recipe novel mountain copper mountain",
        id="h1",
    )
    options = {
        "max_tokens": 60,
        "boundary": "fixed_5",
        "policy": "lfu",
        "bookmark_share": 0.2,
        "text_counter": COUNTER,
    }
    first = page_messages([question], **options)
    summary = HumanMessage(
        "Summary: violin saffron falcon saffron saffron cobalt novel sunrise falcon library "
        "orchard lantern museum harbor glacier meadow pottery canyon violin zebra tundra kyoto oslo",
        id="sum1",
    )
    state = add_messages(first.apply([question]), [RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, question])
    second = page_messages(state, state=first.state.to_value(), **options)
    assert second.evicted
    state = second.apply(state)
    pages = {p.id: p for r in (first, second) for p in r.pages}
    nodes = {n.id: n for r in (first, second) for n in r.nodes}
    history = reconstruct_history(state, pages, COUNTER, clusters=nodes, state=second.state.to_value())
    assert [m.id for m in history] == ["sum1", "h1"]
