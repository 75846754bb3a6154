"""A deterministic agent conversation for the fault, crash and concurrency tests, and its checks.

Turn ``n`` of a thread says a fact; every sixth turn asks about an earlier fact instead, and the
scripted model answers it by calling ``recall`` (by query, or by the first bookmark it sees).
Replies and message ids depend only on the prompt, so a turn retried after a failure, or resumed
in a new process after a crash, produces the same messages as a run that never failed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langmem_paging import InMemoryBM25Index, PageStore, PagingMiddleware, PagingState, reconstruct_history
from langmem_paging.core.records import page_number
from langmem_paging.testing import ScriptedChatModel
from tests.support.harness import COUNTER, assert_valid_chat

MAX_TOKENS = 800
_TURN = re.compile(r"^\[(?P<thread>[^\]]*)\] Turn (?P<n>\d+):")
_BOOKMARK = re.compile(r"\[(p\d+):")


def turn_text(n: int, thread: str = "t") -> str:
    """What the user says at turn `n` of `thread` (the thread's name is in it: leaks are visible)."""
    if n % 6 == 5:
        how = "by bookmark" if n % 12 == 11 else "by query"
        return f"[{thread}] Turn {n}: what did I say about Zarko{n - 4}-{thread}? recall it {how}"
    return f"[{thread}] Turn {n}: my neighbour Zarko{n}-{thread} keeps {n % 9} beehives near Lake Bled{n}."


def probe_text(n: int, thread: str, *, page_ids: list[str], query: str) -> str:
    """A turn asking the model to recall `page_ids` and search for `query` (e.g. another thread's)."""
    return f"[{thread}] Turn {n}: probe recall {json.dumps({'page_ids': page_ids, 'query': query})}"


def turn_message(n: int, thread: str = "t") -> HumanMessage:
    return HumanMessage(turn_text(n, thread), id=f"{thread}-h{n}")


def respond(messages: list[BaseMessage]) -> AIMessage:
    """The scripted assistant: a function of the prompt only."""
    last = messages[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(f"Found it ({last.tool_call_id}).", id=f"ai-after-{last.tool_call_id}")
    match = _TURN.match(str(last.content))
    if match is None:
        return AIMessage("Noted.", id=f"ai-re-{last.id}")
    thread, n = match["thread"], int(match["n"])
    if ": probe recall " in str(last.content):
        args = json.loads(str(last.content).split(": probe recall ", 1)[1])
        return AIMessage(
            "",
            id=f"ai-{thread}-{n}-probe",
            tool_calls=[{"name": "recall", "args": args, "id": f"probe-{thread}-{n}"}],
        )
    if "recall it" not in str(last.content):
        return AIMessage(f"Noted {n}.", id=f"ai-{thread}-{n}")
    if "by bookmark" in str(last.content):
        marks = [m for message in messages[:-1] for m in _BOOKMARK.findall(str(message.content))]
        args: dict[str, Any] = {"page_ids": [marks[0] if marks else "p1", "p999"]}
    else:
        args = {"query": f"Zarko{n - 4}-{thread} beehives"}
    return AIMessage(
        "",
        id=f"ai-{thread}-{n}-call",
        tool_calls=[{"name": "recall", "args": args, "id": f"call-{thread}-{n}"}],
    )


def scripted_model() -> ScriptedChatModel:
    return ScriptedChatModel(responses=[respond] * 100_000)


def build_agent(
    store,
    checkpointer,
    *,
    max_tokens: int = MAX_TOKENS,
    on_store_error: str = "raise",
    retries: int = 2,
    model: ScriptedChatModel | None = None,
    **options,
):
    """A `create_agent` with paging over `store`; returns (agent, middleware, model)."""
    # a fresh, cold index per agent, as in a new process (store calls to load it are part of a recall)
    options = {"boundary": "fixed_4", "policy": "lru", "index": InMemoryBM25Index(), **options}
    paging = PagingMiddleware(max_tokens=max_tokens, store=store, on_store_error=on_store_error, **options)
    paging.page_store.retries = retries
    model = model or scripted_model()
    agent = create_agent(model, tools=[], middleware=[paging], checkpointer=checkpointer, store=store)
    return agent, paging, model


def prompt_tokens(prompt: Sequence[BaseMessage], paging: PagingMiddleware) -> int:
    """What the model received, counted as the middleware counts it: messages and tool schemas."""
    return COUNTER(list(prompt)) + COUNTER.count_tools(paging.tools)


def history_of(page_store: PageStore, thread: str, values: dict) -> list[BaseMessage]:
    """The thread's whole history on the branch of `values` (a checkpoint's state values)."""
    return reconstruct_history(
        values.get("messages", []),
        lambda p: page_store.get(thread, p),
        COUNTER,
        clusters=lambda c: page_store.get_cluster(thread, c),
        state=values.get("paging"),
    )


def said(history: Sequence[BaseMessage]) -> list[str]:
    """The user's messages of a history, in order."""
    return [str(m.content) for m in history if isinstance(m, HumanMessage)]


def check_branch(
    page_store: PageStore,
    thread: str,
    values: dict,
    turns: Sequence[str] | None = None,
    *,
    in_flight: str | None = None,
) -> list[BaseMessage]:
    """Assert the branch of `values` is whole and consistent; return its history.

    - lossless: the user's messages are exactly `turns` (plus `in_flight`, if given, at most once);
      every user turn that completed has the assistant's answer after it;
    - no message twice (ids unique), and the history is a valid chat;
    - no id reused: every page this branch owns is stored with exactly the messages that stand at
      one place of this history (so no other branch's or attempt's page took its number);
    - the user's texts name only this thread (nothing leaked from another thread).
    """
    history = history_of(page_store, thread, values)
    ids = [m.id for m in history]
    assert len(ids) == len(set(ids)), f"{thread}: a message appears twice in the history"
    assert_valid_chat([m for m in history if m.type != "system"])
    user = said(history)
    if turns is not None:
        expected = list(turns)
        assert user in (expected, [*expected, in_flight]) if in_flight else user == expected, (
            f"{thread}: history has {len(user)} user turns, expected {len(expected)}"
            f"{' (+1 in flight)' if in_flight else ''}; first difference at "
            f"{next((i for i, (a, b) in enumerate(zip(user, expected, strict=False)) if a != b), min(len(user), len(expected)))}"
        )
    for k, message in enumerate(history):
        if isinstance(message, HumanMessage) and k + 1 < len(history):
            assert isinstance(history[k + 1], AIMessage), (
                f"{thread}: user turn {message.content!r} has no answer"
            )
    for text in user:
        assert text.startswith(f"[{thread}]"), f"{thread}: a message of another thread: {text!r}"
    branch = PagingState.from_value(values.get("paging"))
    where = {m.id: k for k, m in enumerate(history)}
    for page in page_store.list_pages(thread):
        if not branch.owns("p", page_number(page.id)):
            continue  # an orphan of a failed attempt or another branch: never shown here
        at = [where.get(m.id) for m in page.messages]
        assert None not in at and at == list(range(at[0], at[0] + len(at))), (
            f"{thread}: page {page.id} owned by this branch does not hold a run of its history"
        )
    return history
