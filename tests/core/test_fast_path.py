"""A call whose view fits costs what is new: counts of new messages only, no state write when
nothing changed, the keyword sketch passed on as the checkpoint holds it."""

from __future__ import annotations

import copy

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingMiddleware, page_messages
from langmem_paging.core.state import PagingState
from langmem_paging.integrations.graph_state import state_update
from langmem_paging.testing import ScriptedChatModel


class CountingCounter:
    """One token per message; remembers which messages it was asked about."""

    def __init__(self) -> None:
        self.asked: list[str | None] = []

    def __call__(self, messages):
        self.asked += [m.id for m in messages]
        return len(messages)


def _history(n: int) -> list:
    out = []
    for i in range(n):
        out += [
            HumanMessage(f"Trip {i} to Lisbon{i} with Zarko{i}?", id=f"h{i}"),
            AIMessage(f"Booked Lisbon{i}.", id=f"a{i}"),
        ]
    return out


def test_a_quiet_call_counts_only_the_new_messages_and_writes_no_state():
    counter = CountingCounter()
    history = _history(3)
    first = page_messages(history, max_tokens=100, token_counter=counter)
    assert sorted(counter.asked) == sorted(m.id for m in history)
    counter.asked.clear()

    history += [HumanMessage("And Porto?", id="h-new")]
    snapshot = copy.deepcopy(history)
    state = first.state.to_value()
    second = page_messages(history, max_tokens=100, token_counter=counter, state=state)
    assert counter.asked == ["h-new"]  # the old messages' counts were remembered
    assert not second.changed and second.view == history and history == snapshot

    counter.asked.clear()
    value = second.state.to_value()
    third = page_messages(history, max_tokens=100, token_counter=counter, state=value)
    assert counter.asked == []
    assert third.view == second.view
    assert state_update(third, history, value, "replace") == {}  # nothing changed: no write


def test_an_edited_message_is_counted_again():
    counter = CountingCounter()
    history = _history(2)
    page_messages(history, max_tokens=100, token_counter=counter)
    counter.asked.clear()
    edited = [*history[:-1], AIMessage("Booked Lisbon1 twice.", id="a1")]
    page_messages(edited, max_tokens=100, token_counter=counter)
    assert counter.asked == ["a1"]


def test_the_sketch_is_passed_on_unparsed_by_a_step_that_forms_no_page():
    history = _history(8)
    paged = page_messages(
        history, max_tokens=8, low_water_tokens=6, boundary="fixed_2", token_counter=len, bookmark_share=1.0
    )
    assert paged.pages and paged.state.doc_freq
    value = paged.state.to_value()
    view = paged.view + [HumanMessage("One more?", id="h-more")]
    quiet = page_messages(view, max_tokens=60, token_counter=len, state=value)
    assert not quiet.pages
    assert quiet.state._doc_freq is None  # never parsed
    assert quiet.state.to_value()["doc_freq"] is value["doc_freq"]  # passed on, not regrouped


def test_a_paging_call_still_pages_and_counts_the_sketch():
    history = _history(8)
    before = page_messages(
        history, max_tokens=8, low_water_tokens=6, boundary="fixed_2", token_counter=len, bookmark_share=1.0
    )
    again = page_messages(
        history, max_tokens=8, low_water_tokens=6, boundary="fixed_2", token_counter=len, bookmark_share=1.0
    )
    assert [m.content for m in before.view] == [m.content for m in again.view]
    assert before.state.n_pages == len(before.pages) > 0
    assert PagingState.from_value(before.state.to_value()).doc_freq == before.state.doc_freq


def test_through_the_middleware_a_quiet_turn_asks_the_counter_about_new_messages_only():
    counter = CountingCounter()
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=10_000, store=store, token_counter=counter)
    agent = create_agent(
        ScriptedChatModel(responses=[f"Noted {i}." for i in range(4)]),
        middleware=[paging],
        store=store,
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "quiet"}}
    for i in range(3):
        agent.invoke({"messages": [f"Fact {i}: the ferry to Bled{i} leaves at noon."]}, config)
    asked = counter.asked
    # each message is counted once when it arrives (and the model's answer once when it comes back)
    values = agent.get_state(config).values
    assert len([a for a in asked if a is not None]) == len({a for a in asked if a is not None})
    assert {m.id for m in values["messages"][:-1]} <= set(asked)


@pytest.mark.parametrize("driver", ["sync", "async"])
def test_a_model_call_resolves_its_tokenizer_once(driver, monkeypatch):
    """The middleware counts the prompt with the call's tokenizer and hands it to the step, which
    resolved it again from the model (a chat model without a name attribute: four pydantic misses)."""
    import asyncio

    from langmem_paging.runtime.pager import Pager

    resolved: list[object] = []
    encoding_for = Pager.encoding_for

    def counted(self, model=None, state=None):
        resolved.append(model)
        return encoding_for(self, model, state)

    monkeypatch.setattr(Pager, "encoding_for", counted)
    store = InMemoryStore()
    agent = create_agent(
        ScriptedChatModel(responses=["Noted."]),
        middleware=[PagingMiddleware(max_tokens=10_000, store=store)],
        store=store,
        checkpointer=InMemorySaver(),
    )
    inputs, config = {"messages": ["The ferry to Bled leaves at noon."]}, {"configurable": {"thread_id": "t"}}
    if driver == "sync":
        agent.invoke(inputs, config)
    else:
        asyncio.run(agent.ainvoke(inputs, config))
    assert len(resolved) == 1, resolved


@pytest.mark.slow
def test_forming_a_page_loads_the_english_stemmer_alone():
    """snowballstemmer's package __init__ imports its 30 languages (on an event loop's thread when
    the first page forms); the English module is loaded alone."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom langchain_core.messages import HumanMessage\n"
        "from langmem_paging import page_messages\n"
        "history = [HumanMessage(f'Adopted greyhounds in Lisbon{i}', id=f'h{i}') for i in range(6)]\n"
        "result = page_messages(history, max_tokens=3, boundary='fixed_2', token_counter=len)\n"
        "assert result.pages, result\n"
        "print(sorted(m for m in sys.modules if 'stemmer' in m))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = done.stdout.strip()
    assert "english_stemmer" in loaded and "french_stemmer" not in loaded, loaded
