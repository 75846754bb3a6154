"""A real paged thread for the operator tool tests: `create_agent` + `PagingMiddleware` on SQLite.

Pages, clusters, bookmarks and one `recall` exist after `build_thread`; one user message carries
HTML and a script, for the report's escaping.
"""

from __future__ import annotations

import sqlite3
import uuid
from dataclasses import dataclass
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.sqlite import SqliteStore

from langmem_paging import PagingMiddleware
from langmem_paging.testing import ScriptedChatModel

TURNS = 34
INJECTED = "Remember my PIN hint <script>document.title='pwned'</script> & <b>bold</b> \"quoted\"."
"""Turn 2's text: page content a report must show as text, never run."""
QUESTION = "RECALL p1: what did I say about Zarko0?"


def turn_text(i: int) -> str:
    if i == 2:
        return INJECTED
    return (
        f"Note {i}: my neighbour Zarko{i} keeps {i + 3} beehives near Lake Bled{i} since 19{i:02d} "
        f"and sells the honey at the Saturday market in Radovljica{i}."
    )


def _respond(messages):
    last = messages[-1]
    if isinstance(last, HumanMessage) and str(last.content).startswith("RECALL "):
        page_id = str(last.content).split()[1].rstrip(":")
        return AIMessage(
            "",
            tool_calls=[
                {"name": "recall", "args": {"page_ids": [page_id]}, "id": f"call-{uuid.uuid4().hex[:8]}"}
            ],
        )
    if last.type == "tool":
        return AIMessage("Zarko0 keeps 3 beehives.")
    return AIMessage("Noted.")


@dataclass
class BuiltThread:
    """What `build_thread` made."""

    path: Path
    """The SQLite file holding store and checkpoints."""
    thread_id: str
    """The thread."""
    user_texts: list[str]
    """Every user message, in order."""

    @property
    def uri(self) -> str:
        return f"sqlite:///{self.path}"  # an absolute path: sqlite:////...


def run_thread(store, checkpointer, thread_id: str, *, turns: int = TURNS) -> list[str]:
    """`turns` user turns, then a question the scripted model answers by recalling p1; returns
    the user messages."""
    paging = PagingMiddleware(max_tokens=800, boundary="fixed_4", store=store)
    model = ScriptedChatModel(responses=[_respond] * (turns + 4))
    agent = create_agent(model, middleware=[paging], checkpointer=checkpointer, store=store)
    config = {"configurable": {"thread_id": thread_id}}
    texts = [turn_text(i) for i in range(turns)] + [QUESTION]
    for text in texts:
        agent.invoke({"messages": [HumanMessage(text)]}, config)
    return texts


def build_thread(path: Path, thread_id: str = "ops-thread", *, turns: int = TURNS) -> BuiltThread:
    """`run_thread` on a SQLite file holding both the store and the checkpoints."""
    store_conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    saver_conn = sqlite3.connect(path, check_same_thread=False)
    try:
        store = SqliteStore(store_conn)
        store.setup()
        texts = run_thread(store, SqliteSaver(saver_conn), thread_id, turns=turns)
    finally:
        store_conn.close()
        saver_conn.close()
    return BuiltThread(path=path, thread_id=thread_id, user_texts=texts)


@tool
def lookup(q: str) -> str:
    """Look something up (a long answer: paged on arrival)."""
    return f"Result for {q}: " + " ".join(f"fact{i} about {q} number {i}" for i in range(150))


def _respond_with_tools(messages):
    last = messages[-1]
    if isinstance(last, HumanMessage) and str(last.content).startswith("LOOKUP"):
        return AIMessage(
            "", tool_calls=[{"name": "lookup", "args": {"q": "bees"}, "id": f"call-{uuid.uuid4().hex[:8]}"}]
        )
    if isinstance(last, HumanMessage) and str(last.content).startswith("SEARCH"):
        return AIMessage(
            "",
            tool_calls=[
                {"name": "recall", "args": {"query": "beehives Zarko3"}, "id": f"call-{uuid.uuid4().hex[:8]}"}
            ],
        )
    return AIMessage("Noted.")


def build_tool_thread(path: Path, *, mode: str, thread_id: str = "tools", turns: int = 40) -> BuiltThread:
    """A thread with two large tool results (paged on arrival) and two recall searches, whose
    results are later paged out with the pages around them (kept as references)."""
    store_conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    saver_conn = sqlite3.connect(path, check_same_thread=False)
    try:
        store = SqliteStore(store_conn)
        store.setup()
        paging = PagingMiddleware(max_tokens=900, boundary="fixed_4", store=store, mode=mode)
        model = ScriptedChatModel(responses=[_respond_with_tools] * (3 * turns))
        agent = create_agent(
            model, tools=[lookup], middleware=[paging], checkpointer=SqliteSaver(saver_conn), store=store
        )
        texts = []
        for i in range(turns):
            prefix = "LOOKUP " if i in (5, 20) else "SEARCH " if i in (12, 30) else ""
            texts.append(prefix + turn_text(i))
            agent.invoke({"messages": [HumanMessage(texts[-1])]}, {"configurable": {"thread_id": thread_id}})
    finally:
        store_conn.close()
        saver_conn.close()
    return BuiltThread(path=path, thread_id=thread_id, user_texts=texts)
