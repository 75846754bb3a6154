"""Forks: a branch resumed from an earlier checkpoint never overwrites or sees the other branch's pages."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore

from langmem_paging import Pager, PageStore, PagingConfig, PagingState, reconstruct_history
from langmem_paging.testing import FaultInjectingStore
from tests.support.harness import COUNTER
from tests.support.scenario_helpers import FACTS, agent_history, prompt_tokens, scripted_agent
from tools.fuzzing.oracles import same_messages


def test_a_page_edited_on_one_branch_keeps_the_other_branchs_record():
    """B8: a resident page formed before a fork and edited on one branch was stored again under
    its number when evicted: the record the other branch evicts to was overwritten (it lost a message)."""
    from langmem_paging.core.state import PagingState

    pager = Pager(PagingConfig(max_tokens=600, boundary="fixed_2"), PageStore(InMemoryStore()))
    long = (
        "Fact {i}: Zarko{i} keeps {i} beehives near Lake Bled{i}. "
        + "He sells the honey at the Sunday market in Radovljica{i} and teaches beekeeping. " * 3
    )

    def turn(messages, state, full, i):
        new = [HumanMessage(long.format(i=i), id=f"h{i}"), AIMessage(f"Noted fact {i}.", id=f"a{i}")]
        messages = add_messages(messages, new[:1])
        result = pager.step(messages, state, "t")
        return add_messages(result.apply(messages), new[1:]), result.state.to_value(), full + new

    def rebuilt(messages, state):
        return reconstruct_history(
            messages,
            lambda p: pager.page_store.get("t", p),
            COUNTER,
            clusters=lambda c: pager.page_store.get_cluster("t", c),
            state=state,
        )

    messages, state, full, i = [], {}, [], 0
    while not PagingState.from_value(state).pages:
        messages, state, full = turn(messages, state, full, i)
        i += 1
    fork = (messages, state, full)
    victim = next(iter(PagingState.from_value(state).pages.values())).ids[0]
    messages = add_messages(messages, [RemoveMessage(id=victim)])  # branch A edits the resident page
    full = [m for m in full if m.id != victim]
    for j in range(i, i + 8):
        messages, state, full = turn(messages, state, full, j)
    messages, state, full = fork  # branch B never edited it
    for j in range(i + 100, i + 108):
        messages, state, full = turn(messages, state, full, j)
    assert [m.id for m in rebuilt(messages, state)] == [m.id for m in full]


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


def test_a_page_formed_again_on_another_branch_is_the_stored_record():
    """Correctness v5, bug 1: a branch that formed the same messages into a page after the thread's
    keyword sketch moved on wrote the record again under its number with other keywords, so a recall
    result that had listed it re-expanded differently. The step takes the stored record as it is."""
    store = FaultInjectingStore(InMemoryStore())
    pager = Pager(PagingConfig(max_tokens=600, boundary="fixed_2"), PageStore(store))
    topics = ["beehive", "greyhound", "Kyoto", "tango", "saffron", "lantern", "cobalt", "orchard", "velvet"]
    messages, state, forming = [], {}, None
    for i in range(24):
        words = " ".join(topics[(i + k) % len(topics)] for k in range(4))
        text = f"Turn {i}: {words} and Zarko{i % 5} again, with {words} at Lake Bled{i % 3}. " * 3
        messages = add_messages(messages, [HumanMessage(text, id=f"h{i}")])
        result = pager.step(messages, state, "t")
        if forming is None and "p1" in result.formed:
            forming = (list(messages), state)  # the view and the state p1 was formed from
        messages = add_messages(result.apply(messages), [AIMessage(f"Noted {words}.", id=f"a{i}")])
        state = result.state.to_value()
    first = pager.page_store.get("t", "p1")
    assert forming is not None and first is not None

    again = pager.step(*forming, "t")  # a branch from before p1 forms the same messages again

    assert "p1" in again.formed
    assert pager.page_store.get("t", "p1").to_dict() == first.to_dict(), "the record was rewritten"
    entry = again.state.pages.get("p1") or again.state.shown["p1"]  # resident, or evicted at once
    assert entry.bookmark == first.bookmark
    assert not store.rewrites
