"""A new message that takes the id of a stand-in (bookmark, cluster bookmark, digest), of a repair
result, or an edit of a pinned message, through the user's path (`create_agent` + `PagingMiddleware`
with a scripted model) where it can be: the model sees what the app sent, and nothing paged is lost.

LangGraph's `add_messages` puts a message whose id the state holds in that message's place. In
replace mode a stand-in's id is the id of its page's first message, so the new message displaces the
stand-in; in view mode the state holds the whole history, so it replaces the paged message under the
stand-in. Either way the stand-in is shown again just before it, under an id of its own.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langmem_paging import PagingState, page_messages
from langmem_paging.core.messages import METADATA_KEY, library_mark
from tests.support.harness import COUNTER
from tests.support.scenario_helpers import FACTS, agent_history, scripted_agent
from tools.fuzzing.oracles import chat_problems

NEW = "A brand new question that reuses an old id."
CONFIG = {"configurable": {"thread_id": "t"}}


def _agent_with_bookmarks(mode: str):
    """Twenty-four turns paged into page bookmarks only (a share of 1.0: no cluster to fold into)."""
    agent, paging, model = scripted_agent(700, mode=mode, boundary="fixed_4", bookmark_share=1.0)
    for i in range(24):
        agent.invoke({"messages": [HumanMessage(FACTS[i], id=f"h{i}")]}, CONFIG)
    state = PagingState.from_value(agent.get_state(CONFIG).values["paging"])
    assert state.shown and not state.clusters
    return agent, paging, model, state


@pytest.mark.parametrize("mode", ["replace", "view"])
def test_a_new_message_taking_a_bookmarks_id_is_shown_and_the_bookmark_keeps_its_place(mode: str) -> None:
    """Fuzz kinds "history lost" (replace: pure seed 19) and "hidden" (view: seeds 2, 23): with no
    cluster to fold into, the displaced bookmark was dropped (its pages left the history) in replace
    mode, and in view mode the new message stayed behind the bookmark."""
    agent, paging, model, state = _agent_with_bookmarks(mode)
    page_id, shown = min(state.shown.items(), key=lambda item: int(item[0][1:]))
    before = agent_history(paging, "t", agent.get_state(CONFIG).values)

    agent.invoke({"messages": [HumanMessage(NEW, id=shown.anchor)]}, CONFIG)

    prompt = model.prompts[-1]
    assert any(m.content == NEW for m in prompt), "the model did not see the new message"
    bookmarks = [m for m in prompt if library_mark(m).get("bookmark") == page_id]
    assert bookmarks and bookmarks[0].id != shown.anchor, "the displaced bookmark is not shown again"
    assert prompt.index(bookmarks[0]) + 1 == next(i for i, m in enumerate(prompt) if m.content == NEW)
    assert not chat_problems(prompt)
    history = agent_history(paging, "t", agent.get_state(CONFIG).values)
    assert sum(m.content == NEW for m in history) == 1
    if mode == "replace":  # the paged message and the new one, both, in order
        assert [m for m in history if m.content != NEW][: len(before)] == before
    else:  # the state holds the history: LangGraph replaced the message in place
        assert [m.id for m in history][: len(before)] == [m.id for m in before]


@pytest.mark.parametrize("mode", ["replace", "view"])
def test_a_message_displacing_a_bookmark_is_not_paged_in_the_step_it_arrives(mode: str) -> None:
    """Pure seed 145: the new message sits where the bookmark was, among the oldest messages, and the
    policy paged it out in the same step, before the model saw it."""
    agent, _paging, model, state = _agent_with_bookmarks(mode)
    anchor = min(state.shown.values(), key=lambda s: s.turn).anchor
    agent.invoke({"messages": [HumanMessage(NEW + " " + FACTS[30] * 3, id=anchor)]}, CONFIG)
    assert any(str(m.content).startswith(NEW) for m in model.prompts[-1])


def test_an_edit_of_a_pinned_message_shows_in_view_mode() -> None:
    """Pure seed 47: a history message carrying the library's metadata key (here ``pinned``) was
    kept in the view's skeleton as a stored copy, so its edit never showed."""
    agent, _paging, model = scripted_agent(500, mode="view", boundary="fixed_2")
    pinned = {METADATA_KEY: {"pinned": True}}
    agent.invoke(
        {"messages": [HumanMessage("Always answer in French.", id="rule", additional_kwargs=pinned)]}, CONFIG
    )
    agent.invoke({"messages": [HumanMessage(FACTS[0], id="h0")]}, CONFIG)
    agent.invoke(
        {"messages": [HumanMessage("Always answer in Slovene.", id="rule", additional_kwargs=pinned)]}, CONFIG
    )
    contents = [m.content for m in model.prompts[-1]]
    assert "Always answer in Slovene." in contents and "Always answer in French." not in contents


def _unanswered_call(call_id: str = "c1") -> AIMessage:
    return AIMessage("", id="t1", tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": call_id}])


def test_a_user_message_taking_a_repair_results_id_is_kept_and_the_call_answered_again() -> None:
    """Pure seed 42: a user message took the id of the error result the step had added for an
    unanswered call; the next repair gave its new result that same id, and the user's message
    was lost from the prompt."""
    options = {"max_tokens": 400, "boundary": "fixed_2", "text_counter": COUNTER, "bookmark_share": 1.0}
    history = [HumanMessage("hi", id="h0"), _unanswered_call(), HumanMessage("go on", id="h1")]
    first = page_messages(history, **options)
    repaired = first.apply(history)
    (result,) = [m for m in repaired if isinstance(m, ToolMessage)]
    user = HumanMessage(NEW, id=result.id)  # add_messages puts it in the result's place
    second = page_messages(
        [m if m.id != result.id else user for m in repaired], state=first.state.to_value(), **options
    )
    assert user in second.view
    ids = [m.id for m in second.view]
    assert len(ids) == len(set(ids)) and not chat_problems(second.view)


def test_an_error_result_whose_call_a_new_message_displaced_leaves_the_prompt() -> None:
    """Pure seed 245: the call's message was replaced by a user message with its id; the error
    result the step had added for that call stayed, a tool result without its call (every
    provider refuses that prompt)."""
    options = {"max_tokens": 400, "boundary": "fixed_2", "text_counter": COUNTER}
    history = [_unanswered_call(), HumanMessage("go on", id="h1")]
    first = page_messages(history, **options)
    repaired = first.apply(history)
    assert any(isinstance(m, ToolMessage) for m in repaired)
    edited = [HumanMessage(NEW, id="t1") if m.id == "t1" else m for m in repaired]
    second = page_messages(edited, state=first.state.to_value(), **options)
    assert not chat_problems(second.view)
    assert [m.id for m in second.apply(edited)] == ["t1", "h1"]


@pytest.mark.parametrize("mode", ["replace", "view"])
def test_a_message_taking_the_id_of_a_stand_in_shown_again_displaces_it_once_more(mode: str) -> None:
    """Pure seed 237 (after the fix above): the app may send a message with the id a displaced
    stand-in got (`h0~p1`, which it saw in the state). In view mode the history never held that id,
    so the message was appended and the view held two messages with one id."""
    agent, paging, model, state = _agent_with_bookmarks(mode)
    page_id, shown = min(state.shown.items(), key=lambda item: int(item[0][1:]))
    agent.invoke({"messages": [HumanMessage("first reuse", id=shown.anchor)]}, CONFIG)
    own_id = PagingState.from_value(agent.get_state(CONFIG).values["paging"]).shown[page_id].anchor
    agent.invoke({"messages": [HumanMessage("second reuse", id=own_id)]}, CONFIG)
    prompt = model.prompts[-1]
    ids = [m.id for m in prompt]
    assert len(ids) == len(set(ids))
    assert [m.content for m in prompt if m.content in ("first reuse", "second reuse")]
    assert any(library_mark(m).get("bookmark") == page_id for m in prompt)
    history = agent_history(paging, "t", agent.get_state(CONFIG).values)
    assert sum(m.content in ("first reuse", "second reuse") for m in history) == 2
