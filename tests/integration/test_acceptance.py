"""Acceptance checks for the paging core, through compiled agents: tool loops, forks and time
travel, parallel recalls, concurrent runs on one thread, long replays."""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingMiddleware, PagingWarning, reconstruct_history
from langmem_paging.testing import ScriptedChatModel
from tests.support.harness import COUNTER, assert_valid_chat


def sent_tokens(model: ScriptedChatModel, paging: PagingMiddleware, extra_tools=()) -> list[int]:
    """What each prompt cost, counted as the middleware counts it (messages + tool schemas)."""
    schema = COUNTER.count_tools([*paging.tools, *extra_tools])
    return [COUNTER(p) + schema for p in model.prompts]


def full_history(paging, thread, state):
    return reconstruct_history(
        state["messages"],
        lambda p: paging.page_store.get(thread, p),
        COUNTER,
        clusters=lambda c: paging.page_store.get_cluster(thread, c),
        state=state.get("paging"),
    )


@tool
def search_docs(query: str) -> str:
    """Search the docs."""
    return f"Results for {query}: " + " ".join(
        f"fact-{query}-{i} is documented in section {i}." for i in range(60)
    )


def tool_loop_model(n_calls: int) -> ScriptedChatModel:
    calls = [
        AIMessage("", tool_calls=[{"name": "search_docs", "args": {"query": f"topic{i}"}, "id": f"s{i}"}])
        for i in range(n_calls)
    ]
    return ScriptedChatModel(responses=[*calls, "Done: all topics searched."])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_turn_with_50_tool_calls_stays_under_budget(mode):
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=1600, boundary="fixed_4", store=store)
    model = tool_loop_model(50)
    agent = create_agent(
        model, tools=[search_docs], middleware=[paging], store=store, checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": f"loop-{mode}"}, "recursion_limit": 250}
    inputs = {"messages": [HumanMessage("Search all fifty topics, one by one.")]}
    with pytest.warns(
        PagingWarning, match="usually larger than one recall returns"
    ):  # 4 search results a page
        state = agent.invoke(inputs, config) if mode == "sync" else asyncio.run(agent.ainvoke(inputs, config))

    assert len(model.prompts) == 51
    assert max(sent_tokens(model, paging, [search_docs])) <= 1600
    for prompt in model.prompts:
        assert_valid_chat(prompt)
        assert prompt[0].content == "Search all fifty topics, one by one."  # the user's message stays
    assert paging.page_store.list_pages(f"loop-{mode}"), "older tool groups of the turn were paged"
    history = full_history(paging, f"loop-{mode}", state)
    results = [m for m in history if isinstance(m, ToolMessage)]
    assert len(results) == 50 and results[7].content.startswith("Results for topic7:")


def test_a_large_tool_result_is_paged_on_arrival_behind_a_stub_naming_the_tool():
    @tool
    def fetch_report(year: int) -> str:
        """Fetch the annual report."""
        return f"Annual report {year}. " + "Revenue grew in every region. " * 400

    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=2000, store=store)
    call = AIMessage("", tool_calls=[{"name": "fetch_report", "args": {"year": 2024}, "id": "f1"}])
    read = AIMessage("", tool_calls=[{"name": "recall", "args": {"page_ids": ["p1"], "part": 2}, "id": "r1"}])
    model = ScriptedChatModel(responses=[call, read, "Revenue grew."])
    agent = create_agent(
        model, tools=[fetch_report], middleware=[paging], store=store, checkpointer=InMemorySaver()
    )
    state = agent.invoke({"messages": ["Summarize the 2024 report."]}, {"configurable": {"thread_id": "big"}})

    stub = model.prompts[1][-1]
    assert isinstance(stub, ToolMessage) and stub.tool_call_id == "f1"
    assert stub.content.startswith("[p1:fetch_report result") and '{"year": 2024}' in stub.content
    assert max(sent_tokens(model, paging, [fetch_report])) <= 2000
    part = next(m for m in state["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "r1")
    assert "part 2 of" in part.content and "Revenue grew in every region." in part.content
    original = paging.page_store.get("big", "p1").messages[0]
    assert original.content.startswith("Annual report 2024.") and len(original.content) > 10_000
    assert [m.content for m in full_history(paging, "big", state) if isinstance(m, ToolMessage)][
        0
    ] == original.content


def _facts_agent(store, n_responses, **options):
    paging = PagingMiddleware(
        max_tokens=options.pop("max_tokens", 500), boundary="fixed_4", store=store, **options
    )
    model = ScriptedChatModel(responses=["Noted."] * n_responses)
    return paging, model, create_agent(model, middleware=[paging], store=store, checkpointer=InMemorySaver())


FACTS = [f"Fact {i}: Zarko{i} keeps {i} beehives near Lake Bled{i} since 19{i:02d}." for i in range(40)]


def script_next(model: ScriptedChatModel, *responses) -> None:
    """Make `responses` the model's next answers."""
    at = len(model.prompts)
    model.responses[at:at] = list(responses)


def recall_text(agent, config, model, page_id):
    script_next(
        model,
        AIMessage("", tool_calls=[{"name": "recall", "args": {"page_ids": [page_id]}, "id": f"r-{page_id}"}]),
        "ok",
    )
    state = agent.invoke({"messages": [f"recall {page_id}"]}, config)
    return next(m for m in reversed(state["messages"]) if isinstance(m, ToolMessage)).content


def test_forking_from_a_checkpoint_before_paging_keeps_budget_ids_and_the_abandoned_pages():
    store = InMemoryStore()
    paging, model, agent = _facts_agent(store, 200)
    config = {"configurable": {"thread_id": "fork"}}
    for fact in FACTS[:4]:
        agent.invoke({"messages": [fact]}, config)
    early = agent.get_state(config)  # before anything was paged
    assert not early.values.get("paging", {}).get("shown")
    for fact in FACTS[4:24]:
        agent.invoke({"messages": [fact]}, config)
    abandoned = {p.id: p for p in paging.page_store.list_pages("fork")}
    assert len(abandoned) >= 5

    fork = {
        "configurable": {"thread_id": "fork", "checkpoint_id": early.config["configurable"]["checkpoint_id"]}
    }
    state = agent.invoke({"messages": ["A new branch starts here."]}, fork)
    fork = {
        "configurable": {
            "thread_id": "fork",
            "checkpoint_id": agent.get_state({"configurable": {"thread_id": "fork"}}).config["configurable"][
                "checkpoint_id"
            ],
        }
    }
    start = len(model.prompts)
    for fact in FACTS[24:34]:
        state = agent.invoke({"messages": [fact]}, {"configurable": {"thread_id": "fork"}})
    assert max(sent_tokens(model, paging)[start:]) <= 500

    branch_pages = PagingStateView(state).spans["p"]
    new_ids = {f"p{n}" for a, b in branch_pages for n in range(a, b)} - {"p1", "p2"}
    assert new_ids and not new_ids & set(abandoned), "page ids are never reused across branches"
    for page_id, page in abandoned.items():  # the abandoned branch's pages stay in the store, intact
        assert paging.page_store.get("fork", page_id).messages == page.messages
    only_abandoned = sorted(set(abandoned) - {f"p{n}" for a, b in branch_pages for n in range(a, b)})
    text = recall_text(agent, {"configurable": {"thread_id": "fork"}}, model, only_abandoned[0])
    assert f"No such page or cluster in this conversation: {only_abandoned[0]}" in text
    history = full_history(paging, "fork", state)
    said = [m.content for m in history if isinstance(m, HumanMessage)]
    assert said == FACTS[:4] + ["A new branch starts here."] + FACTS[24:34]


def test_time_travel_with_update_state_keeps_the_budget():
    store = InMemoryStore()
    paging, model, agent = _facts_agent(store, 200)
    config = {"configurable": {"thread_id": "tt"}}
    for fact in FACTS[:20]:
        agent.invoke({"messages": [fact]}, config)
    past = list(agent.get_state_history(config))[12]  # an earlier checkpoint of the thread
    agent.update_state(past.config, {"messages": [HumanMessage("Correction: ignore the last fact.")]})
    start = len(model.prompts)
    for fact in FACTS[20:30]:
        agent.invoke({"messages": [fact]}, config)
    assert max(sent_tokens(model, paging)[start:]) <= 500
    for prompt in model.prompts[start:]:
        assert_valid_chat(prompt)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_six_parallel_recalls_all_count_and_serve_each_page_once(mode):
    store = InMemoryStore()
    paging, model, agent = _facts_agent(store, 50, max_tokens=1376)
    config = {"configurable": {"thread_id": f"par-{mode}"}}
    for fact in FACTS[:40]:
        agent.invoke({"messages": [fact]}, config)
    calls = [
        {"name": "recall", "args": {"page_ids": [pid]}, "id": f"c{i}"}
        for i, pid in enumerate(["p1", "p2", "p1", "p3", "p2", "p4"])
    ]
    script_next(model, AIMessage("", tool_calls=calls), "done")
    inputs = {"messages": ["recall them all"]}
    state = agent.invoke(inputs, config) if mode == "sync" else asyncio.run(agent.ainvoke(inputs, config))
    counts = {pid: PagingStateView(state).access(pid)[0] for pid in ("p1", "p2", "p3", "p4")}
    assert counts == {"p1": 1, "p2": 1, "p3": 1, "p4": 1}  # six results merged; each page served once
    results = {m.tool_call_id: m.content for m in state["messages"] if isinstance(m, ToolMessage)}
    assert "=== p1 · " in results["c0"] and "=== p1 · " not in results["c2"]
    assert "p1: in the result of your other recall call (c0)" in results["c2"]
    assert "p2: in the result of your other recall call (c1)" in results["c4"]
    for pid in ("p1", "p2", "p3", "p4"):  # mirrored at the last model call
        assert paging.page_store.get(f"par-{mode}", pid).access_count == 1


def PagingStateView(state):  # noqa: N802 - reads like a constructor
    from langmem_paging import PagingState

    return PagingState.from_value(state["paging"])


def test_two_runs_at_once_on_one_thread_lose_no_page_and_reuse_no_id():
    store = InMemoryStore()
    paging, model, agent = _facts_agent(store, 400, max_tokens=500)
    config = {"configurable": {"thread_id": "twice"}}

    async def run():
        for k in range(0, 30, 2):
            await asyncio.gather(
                agent.ainvoke({"messages": [FACTS[k]]}, config),
                agent.ainvoke({"messages": [FACTS[k + 1]]}, config),
            )

    asyncio.run(run())
    state = agent.get_state(config).values
    stored = {p.id: p for p in paging.page_store.list_pages("twice")}
    branch = PagingStateView(state)
    # every page the head branch owns is stored and is that branch's own (its messages are the
    # history the head branch rebuilds), and nothing on the branch is lost
    history = full_history(paging, "twice", state)
    ids = [m.id for m in history]
    assert len(ids) == len(set(ids))
    for page_id, page in stored.items():
        if branch.owns("p", int(page_id[1:])) and page_id not in branch.pages:
            assert all(m.id in ids for m in page.messages if not m.additional_kwargs.get("langmem_paging"))
    assert COUNTER(state["messages"]) <= 500 or PagingStateView(state).warned


@pytest.mark.slow
def test_a_20000_message_replay_never_gives_the_model_more_than_max_tokens():
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=2000, boundary="fixed_20", policy="lfu", store=store)
    model = ScriptedChatModel(responses=["Noted."] * 1100)
    agent = create_agent(model, middleware=[paging], store=store, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "long"}}
    sent = 0
    while sent < 20_000:
        batch = []
        for i in range(9):  # a chunk of earlier conversation, then the model answers
            n = sent + 2 * i
            batch += [
                HumanMessage(
                    f"Day {n}: we talked about {json.dumps(['kiln', 'tide', 'fig'][n % 3])} "
                    f"and the number {n * 7919 % 10007}.",
                    id=f"u{n}",
                ),
                AIMessage(f"Noted day {n}.", id=f"m{n}"),
            ]
        batch.append(HumanMessage(f"Day {sent + 18}: anything else?", id=f"u{sent + 18}"))
        agent.invoke({"messages": batch}, config)
        sent += 20
    tokens = sent_tokens(model, paging)
    assert len(tokens) == 1000 and max(tokens) <= 2000
    state = agent.get_state(config).values
    assert len(state["messages"]) < 400, "the context stays bounded"
    assert len(json.dumps(state["paging"])) < 60_000, "the checkpointed paging state stays small"
