"""A user's message carrying the library's metadata (a bookmark's, a tool-result stub's) is just the
user's message: paged, protected and rebuilt as itself."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from langmem_paging import Pager, PageStore, PagingConfig, page_messages, reconstruct_history
from langmem_paging.core.messages import METADATA_KEY
from tests.support.conversations import town_turns as _turns
from tests.support.harness import COUNTER
from tests.support.scenario_helpers import FACTS, step_exchanges
from tools.fuzzing.oracles import same_messages


def test_a_user_message_carrying_bookmark_metadata_is_just_a_message():
    forged = HumanMessage("[p1:secret]", id="f", additional_kwargs={METADATA_KEY: {"bookmark": "p1"}})
    history = [forged, *_turns(3)]
    assert reconstruct_history(history, {}, COUNTER) == history  # no KeyError for a page that does not exist
    result = page_messages(
        [*history, HumanMessage("now", id="n")],
        max_tokens=4,
        boundary="fixed_2",
        token_counter=len,
        text_counter=COUNTER,
        bookmark_share=1.0,
    )
    assert result.pages[0].messages[0] is forged  # paged like any message, not taken for a bookmark


def test_a_user_message_with_copied_bookmark_metadata_is_still_the_users():
    """B4: a user message carrying `langmem_paging` bookmark metadata was taken for the library's
    own: not protected as the newest user message (paged out in a tool loop), and expanded into
    a page by reconstruct_history (the message itself lost)."""
    question = "What did Zarko3 say about the honey market in Radovljica and the beekeeping lessons? " * 2
    spoofed = HumanMessage(question, id="q", additional_kwargs={METADATA_KEY: {"bookmark": "p1"}})
    history = [
        HumanMessage("My neighbour Zarko0 keeps bees near Lake Bled.", id="h0"),
        AIMessage("ok", id="a0"),
        spoofed,
    ]
    for k in range(6):  # the model looks things up before answering
        history += [
            AIMessage(
                "", tool_calls=[{"name": "lookup", "args": {"q": f"Zarko{k}"}, "id": f"c{k}"}], id=f"t{k}"
            ),
            ToolMessage(
                f"Zarko{k} keeps bees near Lake Bled{k}. " * 5,
                tool_call_id=f"c{k}",
                name="lookup",
                id=f"r{k}",
            ),
        ]
    result = page_messages(history, max_tokens=200, boundary="fixed_2", text_counter=COUNTER)
    assert any(m.id == "q" and m.content == question for m in result.view)
    pages = {p.id: p for p in result.pages}
    rebuilt = reconstruct_history(
        result.view, pages, COUNTER, clusters={n.id: n for n in result.nodes}, state=result.state
    )
    assert [m.id for m in rebuilt] == [m.id for m in history]


def test_a_user_message_copying_a_tool_result_stubs_metadata_rebuilds_as_itself():
    """A user message carrying a stub's ``paged_result`` metadata, once in a page, was rebuilt as
    the first message of the page it named (here its own page): the message was lost. Only a
    real stub (the same tool result's id and call id) expands now."""
    words = "canyon concert harvest museum meadow bicycle cobalt violin garden sunrise copper orchard "
    history = [
        AIMessage("chess garden violin", id="a1"),
        HumanMessage(words * 12, id="h1", additional_kwargs={METADATA_KEY: {"paged_result": "p1"}}),
        HumanMessage("tundra violin lantern painting " * 10, id="h2"),
    ]
    result = page_messages(history, max_tokens=150, boundary="fixed_3", text_counter=COUNTER)
    assert result.evicted
    state = result.apply(list(history))
    pages = {p.id: p for p in result.pages}
    rebuilt = reconstruct_history(state, pages, COUNTER, state=result.state.to_value())
    assert rebuilt == history


def test_spoofed_bookmark_metadata() -> None:
    """A user message carrying bookmark metadata does not make reconstruct_history raise or lose it."""
    store = InMemoryStore()
    pager = Pager(PagingConfig(max_tokens=300, boundary="fixed_2"), PageStore(store))
    exchanges = [
        [
            HumanMessage(
                FACTS[i],
                id=f"h{i}",
                additional_kwargs={METADATA_KEY: {"bookmark": "p1"}} if i in (9, 12) else {},
            ),
            AIMessage("ok", id=f"a{i}"),
        ]
        for i in range(14)
    ]
    full: list[BaseMessage] = [m for exchange in exchanges for m in exchange]
    value, msgs = step_exchanges(pager, exchanges)
    rebuilt = reconstruct_history(
        msgs,
        lambda p: pager.page_store.get("t", p),
        COUNTER,
        clusters=lambda c: pager.page_store.get_cluster("t", c),
        state=value,
    )
    diff = same_messages(rebuilt, full)
    assert not diff, f"not lossless: {diff}"
