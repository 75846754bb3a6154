"""Paging shows in a tracer as steps of its own: a ``paging`` run beside the model's run (under the
model node's run) for each call that paged, with the page ids formed, evicted and folded; a
``recall_pages`` run under the recall tool's run with the query and the page ids served. Through
create_agent + PagingMiddleware with a scripted model, sync and async."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tracers.base import BaseTracer
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from langmem_paging import PagingMiddleware
from langmem_paging.testing import ScriptedChatModel

QUESTION = "How many beehives does Zarko2 keep?"


class Runs(BaseTracer):
    """Every run a graph call makes, nested ones included."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: list = []

    def _persist_run(self, run) -> None:
        pass

    def _end_trace(self, run) -> None:
        self.runs.append(run)
        super()._end_trace(run)

    def named(self, name: str) -> list:
        return [r for r in self.runs if r.name == name]


def _fact(i: int) -> HumanMessage:
    return HumanMessage(
        f"Fact {i}: Zarko{i} keeps {i + 100} beehives near Lake Bled{i}. " + "The bees hum. " * 6
    )


def _reply(messages):
    last = messages[-1]
    if isinstance(last, HumanMessage) and last.content == QUESTION:
        return AIMessage(
            "",
            tool_calls=[
                {"name": "recall", "args": {"query": "Zarko2 beehives"}, "id": f"call-{uuid.uuid4().hex[:8]}"}
            ],
        )
    return AIMessage("Noted.")


def _agent():
    model = ScriptedChatModel(responses=[_reply] * 60)
    paging = PagingMiddleware(max_tokens=700, boundary="fixed_2")
    return create_agent(model, middleware=[paging], store=InMemoryStore(), checkpointer=InMemorySaver())


def _drive(agent, mode: str, messages: list, tracer: Runs | None = None) -> None:
    config = {"configurable": {"thread_id": "t"}, "callbacks": [tracer] if tracer else []}
    for message in messages:
        if mode == "sync":
            agent.invoke({"messages": [message]}, config)
        else:
            asyncio.run(agent.ainvoke({"messages": [message]}, config))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_call_that_evicts_has_a_paging_run_beside_the_model_run_with_page_ids(mode):
    agent, tracer = _agent(), Runs()
    _drive(agent, mode, [_fact(i) for i in range(16)], tracer)

    steps = tracer.named("paging")
    evicting = [r for r in steps if r.outputs["evicted"]]
    assert evicting, "no paging run for the calls that evicted"
    run = evicting[-1]
    assert all(p.startswith("p") for p in run.outputs["evicted"])
    assert run.inputs["tokens_before"] > run.outputs["tokens"]
    assert run.metadata["paging_evicted_ids"] == run.outputs["evicted"]
    assert "langmem-paging" in run.tags
    formed = {p for r in steps for p in r.outputs["formed"]}
    assert set(run.outputs["evicted"]) <= formed  # every evicted page was formed by some step's run
    # under the model call's parent: the model node's run, which the chat model's run is a child of too
    parent = next(r for r in tracer.runs if r.id == run.parent_run_id)
    assert parent.name == "model"
    assert any(r.run_type == "llm" and r.parent_run_id == parent.id for r in tracer.runs)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_quiet_calls_make_no_paging_run(mode):
    agent, tracer = _agent(), Runs()
    _drive(agent, mode, [HumanMessage("hello")], tracer)
    assert tracer.named("model") and not tracer.named("paging")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_recall_tools_run_carries_the_query_and_the_page_ids_served(mode):
    agent, tracer = _agent(), Runs()
    _drive(agent, mode, [_fact(i) for i in range(16)])
    _drive(agent, mode, [HumanMessage(QUESTION)], tracer)

    (tool_run,) = [r for r in tracer.runs if r.run_type == "tool" and r.name == "recall"]
    (recall,) = tracer.named("recall_pages")
    assert recall.parent_run_id == tool_run.id
    assert recall.inputs["query"] == "Zarko2 beehives"
    served = recall.outputs["served"]
    assert served and all(p.startswith("p") for p in served)
    assert recall.metadata["paging_recall_served"] == served
    assert "p3" in served  # the page of Fact 2, whose text came back
    assert "=== p3" in tool_run.outputs["output"].update["messages"][0].content


def test_no_tracer_no_run_and_no_error():
    agent = _agent()
    _drive(agent, "sync", [_fact(i) for i in range(8)])  # runs with no callbacks: nothing set up, no error


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_paging_node_that_evicts_has_a_paging_run_under_its_node(mode):
    from langgraph.graph import START, StateGraph

    from langmem_paging import PagingMessagesState, PagingNode

    node = PagingNode(max_tokens=60, boundary="fixed_2")
    graph = (
        StateGraph(PagingMessagesState)
        .add_node("pager", node)
        .add_node("reply", lambda state: {"messages": [AIMessage("Noted.")]})
        .add_edge(START, "pager")
        .add_edge("pager", "reply")
        .compile(checkpointer=InMemorySaver(), store=InMemoryStore())
    )
    tracer = Runs()
    _drive(graph, mode, [HumanMessage(f"I will fly to city{i}.") for i in range(6)], tracer)
    evicting = [r for r in tracer.named("paging") if r.outputs["evicted"]]
    assert evicting
    assert {tracer_run.name for tracer_run in tracer.runs if tracer_run.id == evicting[-1].parent_run_id} == {
        "pager"
    }
