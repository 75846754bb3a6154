"""View mode (the checkpointed messages untouched, the model shown a paged view) through malformed
calls, messages without ids and rewrites."""

from __future__ import annotations

import asyncio
import warnings

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingMiddleware, page_messages
from langmem_paging.core.messages import library_mark
from langmem_paging.testing import ScriptedChatModel
from tests.support.conversations import town_turns as _turns
from tests.support.harness import COUNTER, assert_valid_chat
from tests.support.scenario_helpers import FACTS, malformed_call, prompt_tokens, scripted_agent
from tools.fuzzing.graph import scenario_tools
from tools.fuzzing.oracles import chat_problems


def test_view_mode_survives_a_message_without_an_id():
    history = _turns(8)
    history.insert(5, ToolMessage("Error: bad call", tool_call_id="zz"))  # no id, as create_agent may add
    history.insert(5, AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "zz"}], id="call"))
    from langmem_paging.integrations.graph_state import GraphCall

    state = None
    for point in range(4, len(history) + 1):
        call = GraphCall.prepare(history[:point], state, "view")
        result = page_messages(
            call.view, max_tokens=40, state=state, boundary="fixed_2", token_counter=len, text_counter=COUNTER
        )
        state = call.update(result).get("paging", state)
        assert_valid_chat(result.view)


def test_view_mode_follows_a_history_rewritten_with_remove_all():
    """B9: view mode kept showing the removed history's bookmarks and tool-result stubs after
    REMOVE_ALL_MESSAGES (a tool result without its call), and never showed the summary."""
    facts = [f"Note {i}: the beekeeper Zarko{i} keeps {i} beehives near Lake Bled." for i in range(12)]
    paging = PagingMiddleware(max_tokens=400, boundary="fixed_2", mode="view", store=InMemoryStore())
    model = ScriptedChatModel(responses=["Noted."] * 20)
    agent = create_agent(model, tools=[], middleware=[paging], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for fact in facts:
        agent.invoke({"messages": [fact]}, config)
    assert any(str(m.content).startswith("[") for m in model.prompts[-1])  # something was paged
    summary = HumanMessage("Summary: Zarko keeps bees.", id="s")
    agent.invoke(
        {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, HumanMessage("And now?", id="q")]},
        config,
    )
    assert [m.content for m in model.prompts[-1]] == ["Summary: Zarko keeps bees.", "And now?"]


def test_view_mode_after_malformed_call() -> None:
    """View mode keeps working after a malformed tool call (create_agent adds an error ToolMessage
    with no id)."""
    bad = malformed_call("bad1")
    agent, paging, model = scripted_agent(
        520, mode="view", boundary="fixed_2", responses=["Noted."] * 3 + [bad] + ["ok"] * 40
    )
    config = {"configurable": {"thread_id": "t"}}
    for i in range(20):
        agent.invoke({"messages": [HumanMessage(FACTS[i], id=f"h{i}")]}, config)
    for k, prompt in enumerate(model.prompts):
        problems = chat_problems(prompt)
        assert not problems, f"prompt {k}: {problems[0][0]}"
        tokens = prompt_tokens(model, paging, k=k)
        assert tokens <= 520, f"prompt {k} over budget ({tokens})"
        assert k >= 20 or any(m.id == f"h{k}" for m in prompt), f"prompt {k} lacks its user message"


def test_view_mode_remove_all() -> None:
    """View mode after REMOVE_ALL_MESSAGES (SummarizationMiddleware): no tool-result stub or bookmark of the
    removed history is shown; the prompt is a valid chat."""
    tools = scenario_tools()
    call = AIMessage(
        "", tool_calls=[{"name": "big_report", "args": {"topic": "glacier", "tokens": 3000}, "id": "c1"}]
    )
    agent, _paging, model = scripted_agent(
        1200, mode="view", boundary="fixed_2", responses=[call, "Summary.", "ok", "ok"], tools=tools
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("Report on glaciers please", id="h1")]}, config)
    summary = [
        RemoveMessage(id=REMOVE_ALL_MESSAGES),
        HumanMessage("Summary: glaciers.", id="s1"),
        HumanMessage("Next question.", id="h2"),
    ]
    agent.invoke({"messages": summary}, config)
    prompt = model.prompts[-1]
    problems = chat_problems(prompt)
    assert not problems, problems[0][0] if problems else ""
    stale = [m for m in prompt if library_mark(m)]
    assert not stale, f"stale library messages shown: {[str(m.content)[:40] for m in stale]}"


@tool
def notes(topic: str, words: int) -> str:
    """Notes on `topic`, about `words` words."""
    return " ".join(f"{topic}{k % 53} noted" for k in range(max(1, words // 2)))


# (user message: FACTS joined, tool result sizes in words per model call of the turn)
_TURNS = [(1, [40]), (4, []), (2, [300, 10]), (12, [120]), (1, [500]), (40, []), (6, [60, 60]), (16, [200])]
_TURNS += [(3, [20]), (20, [90]), (1, []), (8, [400, 150]), (14, [30]), (2, [])]


def _script() -> list:
    script: list = []
    for turn, (_, results) in enumerate(_TURNS):
        for call, words in enumerate(results):
            args = {"topic": f"t{turn}c{call}", "words": words}
            script.append(
                AIMessage("", tool_calls=[{"name": "notes", "args": args, "id": f"n{turn}-{call}"}])
            )
        script.append(f"Answer {turn}: Zarko{turn} keeps beehives.")
    return script


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_view_mode_with_importance_tiers_keeps_every_prompt_in_budget_or_names_why(is_async, tmp_path):
    """Correctness v5, bug 6, the reported configuration: view mode, `tokens_150` pages, `lru` with
    importance tiers, a memory store, a SQLite checkpointer, large-result share 0.5, max_tokens=500
    (a prompt of 587 tokens was reported: system, human, ai, tool, human, ~458 of it protected).
    Every prompt the model receives is within the budget, or the step was over budget because what it
    names as protected, as the prompt shows it, with the stand-ins, passes the message budget (and the
    warning names the largest protected message). Here 8 of the 27 prompts are over (the user's
    40-fact message, large tool groups of the turn), each with what it names past the message budget."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from langmem_paging.core.messages import is_bookmark

    paging = PagingMiddleware(
        max_tokens=500,
        mode="view",
        boundary="tokens_150",
        policy="lru",
        tiers="importance",
        large_result_share=0.5,
    )
    results: list = []
    step, astep = paging.pager.step, paging.pager.astep

    def recorded(*args, **kwargs):
        results.append(step(*args, **kwargs))
        return results[-1]

    async def arecorded(*args, **kwargs):
        results.append(await astep(*args, **kwargs))
        return results[-1]

    paging.pager.step, paging.pager.astep = recorded, arecorded
    model = ScriptedChatModel(responses=_script())
    system = "You are a careful assistant. Answer briefly and cite the notes you read."
    turns = [" ".join(FACTS[(t + j) % 40] for j in range(size)) for t, (size, _) in enumerate(_TURNS)]
    config = {"configurable": {"thread_id": "t"}}
    path = str(tmp_path / "checkpoints.sqlite")

    def agent(saver):
        return create_agent(
            model,
            tools=[notes],
            middleware=[paging],
            store=InMemoryStore(),
            checkpointer=saver,
            system_prompt=system,
        )

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if is_async:

            async def run() -> None:
                async with AsyncSqliteSaver.from_conn_string(path) as saver:
                    graph = agent(saver)
                    for text in turns:
                        await graph.ainvoke({"messages": [HumanMessage(text)]}, config)

            asyncio.run(run())
        else:
            with SqliteSaver.from_conn_string(path) as saver:
                graph = agent(saver)
                for text in turns:
                    graph.invoke({"messages": [HumanMessage(text)]}, config)

    assert len(results) == len(model.prompts) == len(_script())
    over = []
    for k, (prompt, result) in enumerate(zip(model.prompts, results, strict=True)):
        tokens = prompt_tokens(model, paging, tools=[notes], k=k)
        kept = {key for unit in result.protected for key in unit.ids}
        # what nothing may evict, as the model was shown it: the named units and the stand-ins
        named = sum(COUNTER.count_message(m) for m in prompt if m.id in kept or is_bookmark(m))
        if tokens > 500:
            assert result.over_budget and named > result.state.budget, (k, tokens, named, result.state.budget)
            over.append(k)
    assert over, "the 40-fact user message alone passes the budget"
    warned = " ".join(str(w.message) for w in caught if "needs" in str(w.message))
    assert "the newest user message" in warned and "more than the budget" in warned, warned
