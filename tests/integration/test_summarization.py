"""Summarizing a paged thread deletes what it summarized: deleted pages never come back.

LangChain's `SummarizationMiddleware` writes ``RemoveMessage(REMOVE_ALL_MESSAGES)``, a summary and
the last messages it keeps. A bookmark it removed used to count as an "orphan" that folds into
the nearest cluster still shown, so when the kept messages held a cluster bookmark, the deleted
pages came back behind it: the model was shown them, and `reconstruct_history` returned them.
"""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.store.memory import InMemoryStore

from langmem_paging import PageStore, PagingMiddleware, page_messages, reconstruct_history
from langmem_paging.core.messages import is_bookmark, library_mark, merge_messages
from langmem_paging.testing import ScriptedChatModel
from tests.support.scenario_helpers import FACTS, prompt_tokens
from tools.fuzzing.graph import scenario_tools
from tools.fuzzing.oracles import chat_problems


def _fact(i: int) -> HumanMessage:
    return HumanMessage(f"Fact {i}: " + " ".join(f"w{i}x{j}" for j in range(10)), id=f"h{i}")


def test_a_summary_keeping_a_cluster_bookmark_does_not_bring_the_deleted_pages_back():
    options = {"max_tokens": 160, "boundary": "fixed_2", "bookmark_share": 0.5}
    messages, paging, pages, nodes = [], None, {}, {}

    def step():
        nonlocal messages, paging
        result = page_messages(messages, state=paging, pages=pages, **options)
        messages, paging = result.apply(messages), result.state.to_value()
        pages.update({p.id: p for p in result.pages})
        nodes.update({n.id: n for n in result.nodes})

    for i in range(5):
        messages = merge_messages(messages, [_fact(i)])
        step()
        messages = merge_messages(messages, [AIMessage(f"Noted {i}.", id=f"a{i}")])
    kept = messages[-3:]
    assert library_mark(kept[0]).get("cluster"), "the scenario keeps a cluster bookmark"
    expected = [m.id for m in reconstruct_history(kept, pages, clusters=nodes, state=paging)]
    messages = merge_messages(
        messages, [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("Summary.", id="s"), *kept]
    )
    for k in range(3):
        messages = merge_messages(messages, [HumanMessage(f"Question {k} about glaciers", id=f"q{k}")])
        step()
        messages = merge_messages(messages, [AIMessage(f"Answer {k}.", id=f"b{k}")])
    rebuilt = [m.id for m in reconstruct_history(messages, pages, clusters=nodes, state=paging)]
    assert rebuilt == ["s", *expected, "q0", "b0", "q1", "b1", "q2", "b2"]


def test_langchains_summarization_of_an_agent_thread_deletes_what_it_summarized():
    store = InMemoryStore()
    paging = PagingMiddleware(max_tokens=400, boundary="fixed_2", bookmark_share=0.5)
    agent = create_agent(
        ScriptedChatModel(responses=[f"Noted {i}." for i in range(40)]),
        middleware=[paging],
        store=store,
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    page_store = PageStore(store)

    def history(values):
        return reconstruct_history(
            values["messages"],
            lambda p: page_store.get("t", p),
            clusters=lambda c: page_store.get_cluster("t", c),
            state=values["paging"],
        )

    values: dict = {}
    for i in range(30):
        values = agent.invoke({"messages": [_fact(i)]}, config)
        clusters = [k for k, m in enumerate(values["messages"]) if library_mark(m).get("cluster")]
        if len(clusters) >= 2:
            break
    assert len(clusters) >= 2, "the thread has two cluster bookmarks"
    keep = len(values["messages"]) - clusters[1]  # the kept messages start at the second cluster bookmark
    summarizer = SummarizationMiddleware(
        model=ScriptedChatModel(responses=["Summary: bees and lakes."]),
        trigger=("messages", 2),
        keep=("messages", keep),
    )
    update = summarizer.before_model(values, None)  # what LangChain's middleware writes
    assert update is not None and isinstance(update["messages"][0], RemoveMessage)
    kept = [m for m in update["messages"][1:] if m.id in {k.id for k in values["messages"]}]
    assert any(is_bookmark(m) for m in kept), "the summary keeps a cluster bookmark"
    before = {m.id for m in history(values)}
    expected = {m.id for m in history({"messages": kept, "paging": values["paging"]})}
    deleted = before - expected
    agent.update_state(config, update)
    for i in range(100, 103):
        values = agent.invoke({"messages": [_fact(i)]}, config)
    after = {m.id for m in history(values)}
    assert deleted and not (deleted & after), f"deleted messages came back: {sorted(deleted & after)}"


def test_view_mode_with_tiers_keeps_a_valid_prompt_when_a_summary_keeps_a_turn_with_paged_tool_groups():
    """View mode + tiers + ``REMOVE_ALL_MESSAGES`` keeping a turn whose tool groups were paged
    inside the turn: a warm digest was written at its page's anchor, which the rewrite had made a
    real AI message with tool calls again, and its tool result followed orphaned (a 400 from any
    provider). A page whose anchor holds a real message again is never written over."""
    from langchain_core.tools import tool

    from langmem_paging.testing.conformance import valid_chat

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"result for {q}: " + " ".join(f"fact{q}{j}" for j in range(60))

    def call(i: int, q: str) -> AIMessage:
        return AIMessage(
            "", tool_calls=[{"name": "lookup", "args": {"q": q}, "id": f"call{i}", "type": "tool_call"}]
        )

    model = ScriptedChatModel(
        responses=[
            "Answer one " + "x " * 30,
            "Answer two " + "y " * 30,
            call(1, "alpha"),
            call(2, "beta"),
            call(3, "gamma"),
            "Done with tools " + "z " * 20,
            "After the summary.",
        ]
    )
    paging = PagingMiddleware(
        max_tokens=800, mode="view", boundary="fixed_4", policy="stae", tiers="importance"
    )
    store = InMemoryStore()
    agent = create_agent(
        model, tools=[lookup], middleware=[paging], store=store, checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t"}}
    for text in ("first question " + "a " * 80, "second question " + "b " * 80):
        agent.invoke({"messages": [HumanMessage(text)]}, config)
    messages = agent.invoke({"messages": [HumanMessage("use the tools three times " + "c " * 40)]}, config)[
        "messages"
    ]
    turn = next(i for i, m in enumerate(messages) if str(m.content).startswith("use the tools"))
    kept = messages[turn:]
    agent.update_state(
        config, {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), HumanMessage("Summary.", id="s"), *kept]}
    )
    agent.invoke({"messages": [HumanMessage("one more " + "d " * 20, id="last")]}, config)
    for prompt in model.prompts:
        valid_chat(prompt)
    values = agent.get_state(config).values
    page_store = PageStore(store)
    rebuilt = reconstruct_history(
        values["messages"],
        lambda p: page_store.get("t", p),
        state=values["paging"],
        clusters=lambda c: page_store.get_cluster("t", c),
    )
    assert [m.id for m in rebuilt] == ["s", *(m.id for m in kept), "last", values["messages"][-1].id]


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
