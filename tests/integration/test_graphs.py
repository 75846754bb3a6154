"""End to end through compiled graphs, with checkpointers: create_agent + PagingMiddleware and
StateGraph + PagingNode. A scripted model calls `recall` and must receive the exact original text."""

from __future__ import annotations

import contextlib
import sqlite3

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from langmem_paging import (
    PageStore,
    PagingMessagesState,
    PagingMiddleware,
    PagingNode,
    PagingWarning,
    is_bookmark,
    reconstruct_history,
)
from langmem_paging.testing import ScriptedChatModel
from tests.support.backends import run_coroutine
from tests.support.harness import COUNTER, assert_valid_chat

FACTS = [f"My neighbour Zarko{i} keeps {i} beehives near Lake Bled{i} since 19{i:02d}." for i in range(14)]


def recall_call(page_ids, call_id="call-1", **extra):
    return AIMessage(
        "", tool_calls=[{"name": "recall", "args": {"page_ids": page_ids, **extra}, "id": call_id}]
    )


def run(graph, inputs, config, mode):
    if mode == "sync":
        return graph.invoke(inputs, config)
    return run_coroutine(graph.ainvoke(inputs, config), graph.store)  # on an async store's own loop


def prompt_tokens(model: ScriptedChatModel, paging: PagingMiddleware, k: int = -1) -> int:
    """What the model received, counted as the middleware counts it: messages and tool schemas."""
    return COUNTER(model.prompts[k]) + COUNTER.count_tools(paging.tools)


def _sqlite_saver():
    return SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))


def history_of(paging, thread, state):
    return reconstruct_history(
        state["messages"],
        lambda p: paging.page_store.get(thread, p),
        COUNTER,
        clusters=lambda c: paging.page_store.get_cluster(thread, c),
        state=state.get("paging"),
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("paging_mode", ["replace", "view"])
def test_agent_recalls_exact_text_of_an_evicted_page(base_store, mode, paging_mode):
    paging = PagingMiddleware(
        max_tokens=520, boundary="fixed_4", policy="lru", store=base_store, mode=paging_mode
    )
    script = ["Noted."] * len(FACTS) + [recall_call(["p1"]), "Zarko0 keeps 0 beehives."]
    model = ScriptedChatModel(responses=script)
    # SqliteSaver is sync-only; the sync SqliteStore is still used from async runs (worker thread).
    saver = _sqlite_saver() if mode == "sync" else InMemorySaver()
    agent = create_agent(model, tools=[], middleware=[paging], store=base_store, checkpointer=saver)
    config = {"configurable": {"thread_id": f"beekeeper-{mode}-{paging_mode}"}}
    thread = config["configurable"]["thread_id"]

    for fact in FACTS:
        state = run(agent, {"messages": [HumanMessage(fact)]}, config, mode)
        assert prompt_tokens(model, paging) <= 520
    state = run(agent, {"messages": [HumanMessage("How many beehives does Zarko0 keep?")]}, config, mode)

    assert model.bound_tools == ["recall"]
    tool_message = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    page = paging.page_store.get(thread, "p1")
    assert page.messages[0].content == FACTS[0]
    assert FACTS[0] in tool_message.content and "Noted." in tool_message.content
    assert "=== p1 · " in tool_message.content
    assert paging.page_store.get(thread, "p1").access_count == 1  # mirrored at the next model call
    # The model saw bookmarks, never the evicted text, before recalling.
    before_recall = model.prompts[-2]

    def stands_for_p1(message):  # p1's own bookmark, or a cluster bookmark with p1 among its members
        mark = message.additional_kwargs.get("langmem_paging", {}) if is_bookmark(message) else {}
        return mark.get("bookmark") == "p1" or (
            "cluster" in mark and "p1" in paging.page_store.members(thread, mark["cluster"])
        )

    assert any(stands_for_p1(m) for m in before_recall)
    assert all(FACTS[0] != m.content for m in before_recall)
    for prompt in model.prompts:
        assert_valid_chat(prompt)
    # Lossless: resident state + stored pages == everything that was said, in order.
    history = history_of(paging, thread, state)
    assert [m.content for m in history if isinstance(m, HumanMessage)] == FACTS + [
        "How many beehives does Zarko0 keep?"
    ]
    if paging_mode == "view":
        assert not any(is_bookmark(m) for m in state["messages"])  # state keeps the full history
        assert [m.content for m in state["messages"] if isinstance(m, HumanMessage)] == [
            m.content for m in history if isinstance(m, HumanMessage)
        ]


def test_recall_result_ages_out_as_a_reference_not_a_new_copy(base_store):
    paging = PagingMiddleware(max_tokens=476, boundary="fixed_4", policy="fifo", store=base_store)
    more = [f"Later note {i}: the ferry to Bled{i} leaves at {i} o'clock on weekdays." for i in range(30)]
    script = ["Noted."] * 14 + [recall_call(["p1"]), "Found it."] + ["Noted."] * 30
    model = ScriptedChatModel(responses=script)
    agent = create_agent(model, tools=[], middleware=[paging], store=base_store, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    for fact in FACTS + ["What about Zarko0?"] + more:
        state = agent.invoke({"messages": [HumanMessage(fact)]}, config)
        assert prompt_tokens(model, paging) <= 600
    recall_message = model.prompts[15][-1]
    assert isinstance(recall_message, ToolMessage) and FACTS[0] in recall_message.content
    pages = paging.page_store.list_pages("t")
    stored_copies = [m for p in pages for m in p.messages if isinstance(m, ToolMessage)]
    assert stored_copies and all(m.content.startswith("[recalled p1;") for m in stored_copies)
    rebuilt = history_of(paging, "t", state)
    tool_message = next(m for m in rebuilt if isinstance(m, ToolMessage))
    assert tool_message.content == recall_message.content  # re-expanded exactly from the referenced page


def test_threads_are_isolated_through_the_agent(base_store):
    paging = PagingMiddleware(max_tokens=400, boundary="fixed_2", store=base_store)
    script = ["ok"] * 10 + [recall_call(["p1", "p2"]), "done"]
    model = ScriptedChatModel(responses=script)
    agent = create_agent(model, tools=[], middleware=[paging], store=base_store, checkpointer=InMemorySaver())
    for fact in FACTS[:10]:
        agent.invoke({"messages": [fact]}, {"configurable": {"thread_id": "alice"}})
    assert paging.page_store.list_pages("alice")
    state = agent.invoke({"messages": ["secrets?"]}, {"configurable": {"thread_id": "bob"}})
    tool_message = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert "No such page or cluster in this conversation: p1, p2" in tool_message.content
    assert "Zarko" not in tool_message.content
    assert paging.page_store.list_pages("bob") == []


@pytest.mark.parametrize(
    "args, expected",
    [
        ({"page_ids": "p1"}, "=== p1 · "),
        ({"page_ids": "[p1:Zarko0,Bled0]"}, "=== p1 · "),
        ({"page_ids": ["p999"]}, "No such page or cluster in this conversation: p999."),
        ({"page_ids": ["drop table"]}, "Not page or cluster ids: 'drop', 'table'"),
        ({"page_ids": [None]}, "Error invoking tool"),
        ({}, "Pass `page_ids`"),
        ({"query": "beehives Bled0"}, "=== p1 ===\n"),
        ({"page_ids": {"a": 1}}, "Error"),
        ({"query": "x" * 100_000}, "Nothing paged out matches the query"),
    ],
)
def test_bad_recall_arguments_come_back_to_the_model(args, expected):
    paging = PagingMiddleware(max_tokens=436, boundary="fixed_2")
    call = AIMessage("", tool_calls=[{"name": "recall", "args": args, "id": "c1"}])
    model = ScriptedChatModel(responses=["ok"] * 12 + [call, "done"])
    agent = create_agent(model, tools=[], middleware=[paging], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    with pytest.warns(RuntimeWarning, match="only in this process's memory"):
        for fact in FACTS[:12]:
            agent.invoke({"messages": [fact]}, config)
    huge = len(str(args)) > 10_000  # the model's own call then takes more than the budget: said once
    with pytest.warns(PagingWarning, match="needs .* tokens") if huge else contextlib.nullcontext():
        state = agent.invoke({"messages": ["recall please"]}, config)
    tool_message = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert expected in tool_message.content
    message_budget = 436 - COUNTER.count_tools(paging.tools)
    assert COUNTER.count_text(tool_message.content) <= message_budget - 16  # within the room left
    assert state["messages"][-1].content == "done"


def _node_graph(store, paging: PagingNode, model, checkpointer, state_schema=PagingMessagesState):
    bound = model.bind_tools([paging.recall_tool])

    def agent(state):
        return {"messages": [bound.invoke(state["messages"])]}

    return (
        StateGraph(state_schema)
        .add_node("paging", paging)
        .add_node("agent", agent)
        .add_node("tools", ToolNode([paging.recall_tool]))
        .add_edge(START, "paging")
        .add_edge("paging", "agent")
        .add_conditional_edges("agent", tools_condition)
        .add_edge("tools", "paging")
        .compile(checkpointer=checkpointer, store=store)
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_state_graph_with_paging_node_recalls_exact_text(base_store, mode):
    paging = PagingNode(max_tokens=260, boundary="fixed_4", policy="lfu")
    script = ["Noted."] * len(FACTS) + [recall_call(["p2"]), "Three."]
    model = ScriptedChatModel(responses=script)
    graph = _node_graph(base_store, paging, model, InMemorySaver())
    config = {"configurable": {"thread_id": "node"}}
    for fact in FACTS:
        run(graph, {"messages": [HumanMessage(fact)]}, config, mode)
        assert COUNTER(model.prompts[-1]) <= 260
    state = run(graph, {"messages": [HumanMessage("Zarko2?")]}, config, mode)
    tool_message = next(m for m in state["messages"] if isinstance(m, ToolMessage))
    assert FACTS[2] in tool_message.content
    assert state["messages"][-1].content == "Three."
    assert PageStore(base_store).get("node", "p2").access_count == 1  # the graph's store: the node has none
    paging_state = graph.get_state(config).values["paging"]
    assert paging_state["clusters"] or paging_state["shown"]  # the state lives in the checkpoint


def test_pre_model_hook_view_leaves_state_whole():
    from langgraph.store.memory import InMemoryStore

    node = PagingNode(
        max_tokens=200, boundary="fixed_4", output_messages_key="llm_input_messages", store=InMemoryStore()
    )
    history = [HumanMessage(f, id=f"h{i}") for i, f in enumerate(FACTS)]
    out = node.invoke({"messages": history}, {"configurable": {"thread_id": "x"}})
    assert is_bookmark(out["llm_input_messages"][0])
    assert COUNTER(out["llm_input_messages"]) <= 200
    assert "messages" not in out and "paging" in out


def test_missing_thread_id_is_a_clear_error():
    from langgraph.store.memory import InMemoryStore

    paging = PagingMiddleware(max_tokens=300, store=InMemoryStore())
    agent = create_agent(ScriptedChatModel(responses=["x"] * 3), middleware=[paging], checkpointer=None)
    with pytest.raises(ValueError, match="thread_id"):
        agent.invoke({"messages": ["hi " * 80]})


def test_a_graph_state_without_the_paging_key_is_a_clear_error():
    from langgraph.store.memory import InMemoryStore

    paging = PagingNode(max_tokens=60, boundary="fixed_2")
    model = ScriptedChatModel(responses=["Noted."] * 10)
    graph = _node_graph(InMemoryStore(), paging, model, InMemorySaver(), state_schema=MessagesState)
    config = {"configurable": {"thread_id": "no-schema"}}
    with pytest.raises(ValueError, match="PagingMessagesState"):
        for fact in FACTS[:8]:
            graph.invoke({"messages": [HumanMessage(fact)]}, config)


def test_a_scripted_models_repr_leaves_out_its_script_and_prompts():
    """LangChain's tracing renders the model's repr at its first call (`dumpd`, for a model it cannot
    serialize): with the script in it, the first call of graphs/deploy_graph.py's model (a million
    responses) took 467 ms, not 3, in each worker of the deployment benchmark."""
    model = ScriptedChatModel(responses=["Noted."] * 3)
    model.invoke("hello")
    shown = repr(model)
    assert "Noted." not in shown and "hello" not in shown
    assert model.prompts[0][0].content == "hello"  # still recorded, only not shown
