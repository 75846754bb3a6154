"""Helpers of the regression scenarios a fuzzing campaign found (scripted agents, pure threads, prompt sizes)."""

from __future__ import annotations

from collections.abc import Iterator

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
)
from langgraph.graph.message import add_messages
from langgraph.store.memory import InMemoryStore

from langmem_paging import (
    TokenCounter,
    page_messages,
    reconstruct_history,
)
from langmem_paging.runtime.pager import Pager
from langmem_paging.step import PagingResult
from tools.fuzzing.vocabulary import COUNTER

FACTS = [f"My neighbour Zarko{i} keeps {i} beehives near Lake Bled{i} since 19{i:02d}." for i in range(40)]


def scripted_agent(
    max_tokens=700,
    *,
    mode="replace",
    boundary="fixed_2",
    policy="fifo",
    store=None,
    responses=None,
    tools=(),
    **options,
):
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from langmem_paging import PagingMiddleware
    from langmem_paging.testing import ScriptedChatModel

    store = store if store is not None else InMemoryStore()
    paging = PagingMiddleware(
        max_tokens=max_tokens, boundary=boundary, policy=policy, mode=mode, store=store, **options
    )
    model = ScriptedChatModel(responses=responses if responses is not None else ["Noted."] * 400)
    agent = create_agent(
        model, tools=list(tools), middleware=[paging], checkpointer=InMemorySaver(), store=store
    )
    return agent, paging, model


def prompt_tokens(model, paging, tools=(), k=-1) -> int:
    # a fresh counter: TokenCounter caches tool counts by id(tool), and ids recycle (B13)
    return COUNTER(model.prompts[k]) + TokenCounter().count_tools([*tools, *paging.tools])


def agent_history(paging, thread, values):
    return reconstruct_history(
        values["messages"],
        lambda p: paging.page_store.get(thread, p),
        COUNTER,
        clusters=lambda c: paging.page_store.get_cluster(thread, c),
        state=values.get("paging"),
    )


def step_exchanges(pager: Pager, exchanges, thread: str = "t") -> tuple[dict, list[BaseMessage]]:
    """Add each exchange (a list of messages) to a thread and page it with `pager` after each one,
    as the middleware does before a model call; returns the paging state and the messages."""
    value: dict = {}
    msgs: list[BaseMessage] = []
    for exchange in exchanges:
        msgs = add_messages(msgs, exchange)
        result = pager.step(msgs, value, thread)
        value, msgs = result.state.to_value(), result.apply(msgs)
    return value, msgs


def fact_exchanges(n: int) -> list[list[BaseMessage]]:
    return [[HumanMessage(FACTS[i], id=f"h{i}"), AIMessage("ok", id=f"a{i}")] for i in range(n)]


def pure_thread(turns, *, text=None, reply=None, **options):
    """Drive `page_messages` over a simple chat (one step per user turn); yields after each step."""
    state, paging, pages, nodes, full = [], None, {}, {}, []
    for i in range(turns):
        user = HumanMessage(
            (text or "My neighbour Zarko{i} keeps {i} beehives near Lake Bled{i}.").format(i=i), id=f"h{i}"
        )
        full.append(user)
        state = add_messages(state, [user])
        result = page_messages(state, state=paging, text_counter=COUNTER, **options)
        state, paging = result.apply(state), result.state.to_value()
        pages.update({p.id: p for p in result.pages})
        nodes.update({n.id: n for n in result.nodes})
        answer = AIMessage((reply or "Noted {i}.").format(i=i), id=f"a{i}")
        full.append(answer)
        state = add_messages(state, [answer])
        yield result, state, paging, pages, nodes, full


def page_at_user_turns(history: list[BaseMessage], **options) -> Iterator[PagingResult]:
    """Add `history` one message at a time and page it with `page_messages` at each user message (the
    model call it starts), carrying the paged messages and state on; yields each step's result."""
    value: dict = {}
    msgs: list[BaseMessage] = []
    for message in history:
        msgs = add_messages(msgs, [message])
        if isinstance(message, HumanMessage):
            result = page_messages(msgs, state=value, text_counter=COUNTER, **options)
            yield result
            value, msgs = result.state.to_value(), result.apply(msgs)


def malformed_call(call_id: str, *, tool_calls: list[dict] | None = None) -> AIMessage:
    """A model message whose `lookup` call has arguments cut short (invalid JSON), as a provider may send;
    `tool_calls` are well-formed calls beside it."""
    invalid = {
        "name": "lookup",
        "args": '{"q": "tru',
        "id": call_id,
        "error": "malformed",
        "type": "invalid_tool_call",
    }
    return AIMessage("", tool_calls=tool_calls or [], invalid_tool_calls=[invalid])
