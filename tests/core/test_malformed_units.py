"""An earlier turn's malformed tool call pages like any other unit (issue 23, "Malformed calls pageable").

`create_agent` answers a malformed call with an error result that has no id at the next model call;
that unit could not be removed, so the earlier malformed call (its raw arguments counted) stayed in
the prompt whatever the budget: 2,980 tokens at a 1,500-token budget before the fix.
"""

from __future__ import annotations

import random
import warnings

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langmem_paging import page_messages
from tests.support.scenario_helpers import FACTS, agent_history, prompt_tokens, scripted_agent
from tools.fuzzing.oracles import chat_problems, same_messages
from tools.fuzzing.vocabulary import COUNTER, VOCAB

TURNS = 8
MALFORMED_AT = 3
"""The model call (one per turn here) that answers with the malformed call."""


def _malformed_call(tokens: int) -> AIMessage:
    """A call to `lookup` whose JSON arguments were cut short after about `tokens` tokens."""
    rng = random.Random(7)
    words: list[str] = []
    while COUNTER.count_text(" ".join(words)) < tokens:
        words += [rng.choice(VOCAB) for _ in range(50)]
    raw = '{"q": "' + " ".join(words)
    return AIMessage(
        "",
        invalid_tool_calls=[
            {"name": "lookup", "args": raw, "id": "bad1", "error": "malformed", "type": "invalid_tool_call"}
        ],
    )


def _run(budget: int, mode: str):
    responses: list = ["Noted."] * MALFORMED_AT + [_malformed_call(2500)] + ["Sorry, noted."] * TURNS
    agent, paging, model = scripted_agent(budget, mode=mode, boundary="fixed_2", responses=responses)
    config = {"configurable": {"thread_id": "t"}}
    ledger: list[BaseMessage] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(TURNS):
            values = agent.invoke({"messages": [HumanMessage(FACTS[i], id=f"h{i}")]}, config)
            known = {m.id for m in ledger}
            ledger += [m for m in values["messages"] if m.id not in known]
    return agent, paging, model, config, ledger


@pytest.mark.parametrize("mode", ["replace", "view"])
@pytest.mark.parametrize("budget", [1500, 500])
def test_the_prompt_after_a_long_malformed_call_stays_within_budget(budget: int, mode: str) -> None:
    agent, paging, model, config, ledger = _run(budget, mode)
    malformed = model.prompts[MALFORMED_AT + 1]
    assert any(getattr(m, "invalid_tool_calls", None) for m in malformed)  # the turn after the call
    assert COUNTER([_malformed_call(2500)]) > 2500
    for k, prompt in enumerate(model.prompts):
        assert prompt_tokens(model, paging, k=k) <= budget, f"prompt {k}: {prompt_tokens(model, paging, k=k)}"
        assert not chat_problems(prompt), f"prompt {k}: {chat_problems(prompt)}"
    values = agent.get_state(config).values
    if mode == "replace":  # lossless: the malformed call comes back with its raw arguments
        history = agent_history(paging, "t", values)
        assert same_messages(history, ledger) is None, same_messages(history, ledger)
        original = next(m for m in ledger if isinstance(m, AIMessage) and m.invalid_tool_calls)
        assert [m for m in history if m.id == original.id] == [original]


def test_the_malformed_call_is_recallable_behind_its_stub() -> None:
    agent, paging, model, config, _ledger = _run(1500, "replace")
    stub = next(
        m for m in model.prompts[MALFORMED_AT + 1] if isinstance(m, AIMessage) and m.invalid_tool_calls
    )
    assert "malformed call to lookup" in str(stub.content)
    assert stub.invalid_tool_calls[0]["id"] == "bad1" and not stub.invalid_tool_calls[0]["args"]
    page_id = stub.additional_kwargs["langmem_paging"]["paged_result"]
    page = paging.page_store.get("t", page_id)
    assert page is not None and page.messages[0].invalid_tool_calls[0]["args"].startswith('{"q": "')


def test_the_current_turns_malformed_call_stays_whole() -> None:
    """The turn's latest tool group (a malformed call beside a valid one, both answered) is what the
    model is working on: over budget, older units go, it stays as it is."""
    call = _malformed_call(600).model_copy(
        update={
            "id": "c",
            "tool_calls": [{"name": "lookup", "args": {"q": "Bled"}, "id": "ok1", "type": "tool_call"}],
        }
    )
    turn = [
        HumanMessage("look it up", id="q"),
        call,
        ToolMessage("found", tool_call_id="ok1", id="r1"),
        ToolMessage("malformed", tool_call_id="bad1", id="r2", status="error"),
    ]
    older = [
        m for i in range(6) for m in (HumanMessage(FACTS[i], id=f"h{i}"), AIMessage("Noted.", id=f"a{i}"))
    ]
    result = page_messages([*older, *turn], max_tokens=700, boundary="fixed_2", text_counter=COUNTER)
    assert result.evicted
    assert [m for m in result.view if m.id == "c"] == [call]
