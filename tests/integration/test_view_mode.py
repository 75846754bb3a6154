"""View mode (the checkpointed messages untouched, the model shown a paged view) through malformed
calls, messages without ids and rewrites."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
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
