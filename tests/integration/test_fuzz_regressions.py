"""Regression scenarios a fuzzing campaign found (compiled agents and graphs): one deterministic test per bug.

Each was a `tools/fuzz.py` targeted scenario; the random campaigns are `python tools/fuzz.py`. Those whose
test already lived in `tests/core/test_regressions.py` are tested there only (see `tests/core/test_fuzz_regressions.py`).
"""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.store.memory import InMemoryStore

from langmem_paging import (
    PagingState,
)
from langmem_paging.core.messages import library_mark
from langmem_paging.testing import FaultInjectingStore
from tests.support.scenario_helpers import (
    FACTS,
    agent_history,
    malformed_call,
    prompt_tokens,
    scripted_agent,
)
from tools.fuzzing.graph import scenario_tools
from tools.fuzzing.oracles import chat_problems, same_messages
from tools.fuzzing.report import INJECTED, InjectedStoreError
from tools.fuzzing.vocabulary import VOCAB


@pytest.mark.parametrize("mode", ["replace", "view"])
def test_invalid_tool_calls_grouped(mode: str) -> None:
    """AI with invalid_tool_calls and its error ToolMessage are never split by a page cut."""
    responses = []
    for i in range(30):
        responses += [malformed_call(f"bad{i}"), f"Sorry, answer {i}."] if i % 2 else [f"Answer {i}."]
    agent, _paging, model = scripted_agent(520, mode=mode, boundary="fixed_1", responses=responses)
    config = {"configurable": {"thread_id": "t"}}
    for i in range(20):
        agent.invoke({"messages": [HumanMessage(FACTS[i])]}, config)
    for k, prompt in enumerate(model.prompts):
        problems = chat_problems(prompt)
        assert not problems, f"prompt {k}: {problems[0][0]}"


def test_remove_in_resident_page() -> None:
    """RemoveMessage of a message in a formed-but-resident page, then REMOVE_ALL, never bricks the thread."""
    agent, paging, _model = scripted_agent(600, boundary="fixed_4")
    config = {"configurable": {"thread_id": "t"}}
    for i in range(10):
        agent.invoke({"messages": [HumanMessage(FACTS[i], id=f"h{i}")]}, config)
    value = PagingState.from_value(agent.get_state(config).values.get("paging"))
    resident = [i for page in value.pages.values() for i in page.ids]
    target = resident[0] if resident else "h9"
    agent.invoke({"messages": [RemoveMessage(id=target), HumanMessage("next", id="n1")]}, config)
    summary = [
        RemoveMessage(id=REMOVE_ALL_MESSAGES),
        HumanMessage("summary", id="s"),
        HumanMessage("after", id="n2"),
    ]
    agent.invoke({"messages": summary}, config)
    for i in range(10, 16):
        agent.invoke({"messages": [HumanMessage(FACTS[i], id=f"h{i}")]}, config)
    history = agent_history(paging, "t", agent.get_state(config).values)
    want = ["summary", "after", *FACTS[10:16]]
    got = [m.content for m in history if isinstance(m, HumanMessage)]
    assert got == want, f"history after REMOVE_ALL: {got[:4]}... expected {want[:4]}..."


B1 = (
    "B1: a new message whose id equals an evicted message's id that anchors a cluster bookmark is hidden "
    "from the model (view mode)"
)


@pytest.mark.parametrize(
    "mode", ["replace", pytest.param("view", marks=pytest.mark.xfail(strict=True, reason=B1))]
)
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


def test_concurrent_runs() -> None:
    """Two ainvoke at once on one thread: one lineage kept whole, budget held afterwards."""
    agent, paging, model = scripted_agent(520, boundary="fixed_2")
    config = {"configurable": {"thread_id": "t"}}

    async def go():
        for i in range(6):
            await agent.ainvoke({"messages": [HumanMessage(FACTS[i], id=f"h{i}")]}, config)
        for k in range(4):
            await asyncio.gather(
                agent.ainvoke({"messages": [HumanMessage(FACTS[10 + 2 * k], id=f"a{k}")]}, config),
                agent.ainvoke({"messages": [HumanMessage(FACTS[11 + 2 * k], id=f"b{k}")]}, config),
            )
        for i in range(20, 26):
            await agent.ainvoke({"messages": [HumanMessage(FACTS[i], id=f"h{i}")]}, config)

    asyncio.run(go())
    for k in range(len(model.prompts)):
        tokens = prompt_tokens(model, paging, k=k)
        assert tokens <= 520, f"prompt {k} over budget: {tokens} > 520"
    history = agent_history(paging, "t", agent.get_state(config).values)
    ids = [m.id for m in history if isinstance(m, HumanMessage)]
    assert ids[:6] == [f"h{i}" for i in range(6)], f"user turns lost: {ids}"
    assert ids[-6:] == [f"h{i}" for i in range(20, 26)], f"user turns lost: {ids}"
    for k in range(4):
        assert {f"a{k}", f"b{k}"} & set(ids), f"both concurrent turns {k} lost: {ids}"


def test_flaky_store_recovers(rate: float = 0.1, seed: int = 0, turns: int = 40) -> None:
    """A store failing `rate` of calls: failed turns raise, the next turn recovers, nothing lost,
    budget held."""
    store = FaultInjectingStore(InMemoryStore(), p=rate, seed=seed, landed=0.5, error=InjectedStoreError)
    agent, paging, model = scripted_agent(520, boundary="fixed_2", store=store)
    config = {"configurable": {"thread_id": "t"}}
    failed = 0
    for i in range(turns):
        try:
            agent.invoke({"messages": [HumanMessage(FACTS[i % 40] + f" #{i}", id=f"h{i}")]}, config)
        except INJECTED:
            failed += 1
    store.enabled = False
    agent.invoke({"messages": [HumanMessage("last", id="last")]}, config)
    tokens = prompt_tokens(model, paging)
    assert tokens <= 520, f"prompt over budget after store failures: {tokens}"
    history = agent_history(paging, "t", agent.get_state(config).values)
    ids = [m.id for m in history if isinstance(m, HumanMessage)]
    missing = sorted({f"h{i}" for i in range(turns)} - set(ids))
    assert ids == [f"h{i}" for i in range(turns)] + ["last"], (
        f"{failed} failed turns; user turns lost or out of order: missing {missing[:5]}, got {len(ids)}"
    )


def test_recall_no_stale_state() -> None:
    """Recall writes a delta: pages do not vanish and ids are not reused after recalls."""
    from langchain_core.messages import AIMessage as AI

    def recall_call(ids, cid):
        return AI("", tool_calls=[{"name": "recall", "args": {"page_ids": ids}, "id": cid}])

    responses = []
    for i in range(30):
        responses += [recall_call(["p1", "p2"], f"c{i}"), "ok"] if i % 3 == 2 else ["Noted."]
    agent, paging, _model = scripted_agent(700, boundary="fixed_2", responses=responses)
    config = {"configurable": {"thread_id": "t"}}
    for i in range(30):
        agent.invoke({"messages": [HumanMessage(FACTS[i], id=f"h{i}")]}, config)
    history = agent_history(paging, "t", agent.get_state(config).values)
    got = [m.content for m in history if isinstance(m, HumanMessage)]
    assert got == FACTS[:30], f"history lost after recalls: {len(got)} of 30 user turns"
    pages = paging.page_store.list_pages("t")
    assert len({p.id for p in pages}) == len(pages), "page ids reused"


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


def test_thread_isolation() -> None:
    """Recall in thread B of an id that exists only in thread A says no such page."""
    from langchain_core.messages import AIMessage as AI

    call = AI("", tool_calls=[{"name": "recall", "args": {"page_ids": ["p1", "p5", "c1"]}, "id": "c1"}])
    call2 = AI("", tool_calls=[{"name": "recall", "args": {"query": "beehives Zarko3 Bled3"}, "id": "c2"}])
    agent, _paging, _model = scripted_agent(
        500, boundary="fixed_2", responses=["ok"] * 20 + [call, "done", call2, "done"]
    )
    for i in range(20):
        agent.invoke({"messages": [HumanMessage(FACTS[i])]}, {"configurable": {"thread_id": "alice"}})
    state = agent.invoke({"messages": ["secrets?"]}, {"configurable": {"thread_id": "bob"}})
    state = agent.invoke({"messages": ["search?"]}, {"configurable": {"thread_id": "bob"}})
    tool_messages = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert "No such page or cluster in this conversation: p1, p5, c1" in tool_messages[0].content, (
        f"bob's recall of alice's ids: {tool_messages[0].content[:200]!r}"
    )
    assert not any("Lake Bled" in m.content for m in tool_messages), "bob read alice's text"


def test_large_tool_result_stub(kind: str = "middleware") -> None:
    """A 5,000-token tool result is paged on arrival: the model sees a stub naming the tool and its args."""
    tools = scenario_tools()
    call = AIMessage(
        "", tool_calls=[{"name": "big_report", "args": {"topic": "glacier", "tokens": 5000}, "id": "big1"}]
    )
    agent, paging, model = scripted_agent(
        1600, boundary="fixed_2", responses=["ok", call, "done", "ok"], tools=tools
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("hello")]}, config)
    agent.invoke({"messages": [HumanMessage("report on glaciers please")]}, config)
    prompt = model.prompts[2]
    results = [m for m in prompt if isinstance(m, ToolMessage)]
    assert results and "big_report" in results[0].content and "glacier" in results[0].content, (
        f"stub: {results[0].content[:200] if results else None!r}"
    )
    assert prompt_tokens(model, paging, tools, k=2) <= 1600, "over budget"


@pytest.mark.parametrize("mode", ["replace", "view"])
def test_long_tool_loop(mode: str) -> None:
    """One user turn with 50 tool calls stays within budget and valid."""
    tools = scenario_tools()
    responses = (
        ["ok"]
        + [
            AIMessage(
                "",
                tool_calls=[{"name": "lookup", "args": {"q": f"item {k} " + VOCAB[k % 30]}, "id": f"l{k}"}],
            )
            for k in range(50)
        ]
        + ["done"]
    )
    agent, paging, model = scripted_agent(
        800, mode=mode, boundary="fixed_3", responses=responses, tools=tools
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("hello")]}, config)
    agent.invoke({"messages": [HumanMessage("look up fifty things")]}, config)
    for k, prompt in enumerate(model.prompts):
        problems = chat_problems(prompt)
        assert not problems, f"prompt {k}: {problems[0][0]}"
        tokens = prompt_tokens(model, paging, tools, k=k)
        assert tokens <= 800, f"prompt {k} over budget: {tokens}"
    history = agent_history(paging, "t", agent.get_state(config).values)
    assert sum(isinstance(m, ToolMessage) for m in history) == 50, "tool results lost"


def test_fork_abandoned_pages() -> None:
    """Resume from an earlier checkpoint: budget holds, the abandoned branch's pages stay intact in the store
    and are not visible to recall on the new branch, ids are not reused."""
    from langchain_core.messages import AIMessage as AI

    script = (
        ["ok"] * 14
        + [
            AI("", tool_calls=[{"name": "recall", "args": {"page_ids": ["p5", "p6", "p7"]}, "id": "r1"}]),
            "done",
        ]
        + ["ok"] * 10
    )
    store = FaultInjectingStore(InMemoryStore())
    agent, paging, model = scripted_agent(500, boundary="fixed_2", responses=script, store=store)
    config = {"configurable": {"thread_id": "t"}}
    for i in range(4):
        agent.invoke({"messages": [HumanMessage(FACTS[i])]}, config)
    fork_at = agent.get_state(config).config["configurable"]["checkpoint_id"]
    then = PagingState.from_value(agent.get_state(config).values.get("paging"))
    for i in range(4, 14):
        agent.invoke({"messages": [HumanMessage(FACTS[i])]}, config)
    abandoned_history = agent_history(paging, "t", agent.get_state(config).values)
    abandoned_checkpoint = agent.get_state(config).config["configurable"]["checkpoint_id"]
    state = agent.invoke(
        {"messages": [HumanMessage("what about p5?")]},
        {"configurable": {"thread_id": "t", "checkpoint_id": fork_at}},
    )
    tool = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
    owned_then = [f"p{n}" for n in (5, 6, 7) if then.owns("p", n)]
    assert owned_then or "No such page" in tool.content, (
        f"recall on the new branch saw abandoned pages: {tool.content[:200]!r}"
    )
    for i in range(20, 30):
        agent.invoke({"messages": [HumanMessage(FACTS[i])]}, config)
    assert not store.rewrites, f"page records rewritten: {store.rewrites[:2]}"
    again = agent_history(
        paging,
        "t",
        agent.get_state({"configurable": {"thread_id": "t", "checkpoint_id": abandoned_checkpoint}}).values,
    )
    assert again == abandoned_history, (
        f"abandoned branch no longer rebuilds: {same_messages(again, abandoned_history)}"
    )
    for k in range(len(model.prompts)):
        assert prompt_tokens(model, paging, k=k) <= 500, f"prompt {k} over budget"


def test_rebuild_keeps_repaired_tool_call_order() -> None:
    """create_agent repairs a malformed tool call by inserting an error ToolMessage (REMOVE_ALL_MESSAGES and
    the list again); the rebuilt history keeps the state's order."""
    tools = scenario_tools()
    bad = malformed_call("bad1", tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": "ok1"}])
    agent, paging, _model = scripted_agent(
        3000, boundary="fixed_2", responses=["ok", bad, "done", "ok"], tools=tools
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("hello", id="h1")]}, config)
    agent.invoke({"messages": [HumanMessage("look it up", id="h2")]}, config)
    agent.invoke({"messages": [HumanMessage("thanks", id="h3")]}, config)
    values = agent.get_state(config).values
    rebuilt = agent_history(paging, "t", values)
    assert rebuilt == values["messages"], (
        f"{[(m.type, m.content[:12]) for m in rebuilt if m.type == 'tool']} != "
        f"{[(m.type, m.content[:12]) for m in values['messages'] if m.type == 'tool']}"
    )


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


@pytest.mark.parametrize("mode", ["replace", "view"])
def test_summarization_middleware(mode: str) -> None:
    """With LangChain's SummarizationMiddleware before paging, every prompt is valid, within budget, holds
    the user's new message and, once a summary was made, the summary."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import SummarizationMiddleware
    from langgraph.checkpoint.memory import InMemorySaver

    from langmem_paging import PagingMiddleware
    from langmem_paging.testing import ScriptedChatModel

    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=700, boundary="fixed_2", mode=mode, store=store)
    summarizer = ScriptedChatModel(responses=[f"Summary {k}: bees, lakes and honey." for k in range(20)])
    summarization = SummarizationMiddleware(model=summarizer, trigger=("messages", 12), keep=("messages", 4))
    tools = scenario_tools()
    model = ScriptedChatModel(responses=["Noted."] * 40)
    agent = create_agent(
        model, tools=tools, middleware=[summarization, paging], checkpointer=InMemorySaver(), store=store
    )
    config = {"configurable": {"thread_id": "t"}}
    for i in range(16):
        agent.invoke({"messages": [HumanMessage(FACTS[i], id=f"h{i}")]}, config)
        prompt = model.prompts[-1]
        problems = chat_problems(prompt)
        assert not problems, f"turn {i}: {problems[0][0]}"
        assert prompt_tokens(model, paging, tools) <= 700, f"turn {i}: over budget"
        assert any(m.id == f"h{i}" and m.content == FACTS[i] for m in prompt), (
            f"turn {i}: the user's message is not in the prompt"
        )
        assert not summarizer.prompts or any("Summary" in str(m.content) for m in prompt), (
            f"turn {i}: the summary is not in the prompt: {[str(m.content)[:24] for m in prompt]}"
        )
