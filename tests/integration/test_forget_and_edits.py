"""Forgetting one message, and edits reaching the pages.

A message removed for privacy (a card number) stayed recallable once paged out, and there was no
way to forget one message short of deleting the thread; in view mode a message edited after it was
paged out was recalled with its old text.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing, contextmanager

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langmem_paging import PageStore, PagingMiddleware, reconstruct_history
from langmem_paging.cli import main as cli
from langmem_paging.storage.page_store import FORGOTTEN
from langmem_paging.testing import ScriptedChatModel

CARD = "4111 1111 1111 1111"
FACTS = [f"Note {i}: my neighbour Zarko{i} keeps {i} beehives near Lake Bled." for i in range(14)]


def _search(query: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "recall", "args": {"query": query}, "id": f"s-{query[:8]}"}])


def _turns(agent, config, texts):
    values = {}
    for text in texts:
        values = agent.invoke({"messages": [text]}, config)
    return values


@contextmanager
def _sqlite_file(path: str):
    """A SQLite file holding the store and the checkpoints."""
    with (
        closing(sqlite3.connect(path, check_same_thread=False, isolation_level=None)) as conn,
        closing(sqlite3.connect(path, check_same_thread=False)) as saver_conn,
    ):
        store = SqliteStore(conn)
        store.setup()
        yield store, SqliteSaver(saver_conn)


def test_a_forgotten_message_is_gone_from_pages_search_and_recall_and_the_rest_still_rebuilds(tmp_path):
    path = str(tmp_path / "thread.sqlite")
    config = {"configurable": {"thread_id": "privacy"}}
    with _sqlite_file(path) as (store, saver):
        paging = PagingMiddleware(max_tokens=476, boundary="fixed_2", store=store)
        model = ScriptedChatModel(responses=["Noted."] * 15 + [_search("card number"), "None."])
        agent = create_agent(model, middleware=[paging], store=store, checkpointer=saver)
        _turns(agent, config, [HumanMessage(f"My card number is {CARD}, keep it.", id="card"), *FACTS])
        holder = [
            p.id for p in paging.page_store.list_pages("privacy") if any(m.id == "card" for m in p.messages)
        ]
        assert holder, "the card message was paged out"
        assert paging.page_store.forget("privacy", "card") == holder
        values = agent.invoke({"messages": ["What was my card number?"]}, config)
    result = next(
        m for m in values["messages"] if isinstance(m, ToolMessage) and m.tool_call_id.startswith("s-")
    )
    assert CARD not in result.content
    with closing(sqlite3.connect(path, check_same_thread=False, isolation_level=None)) as conn:
        pages = PageStore(SqliteStore(conn))
        history = reconstruct_history(
            values["messages"],
            lambda p: pages.get("privacy", p),
            clusters=lambda c: pages.get_cluster("privacy", c),
            state=values["paging"],
        )
        assert [m.content for m in history if m.id == "card"] == [FORGOTTEN]
        assert [
            m.content for m in history if m.id.startswith("lc") is False and str(m.content).startswith("Note")
        ] == FACTS
        assert not any(CARD in str(m.content) for p in pages.list_pages("privacy") for m in p.messages)
    uri = f"sqlite:///{path}"
    assert cli(["verify", "privacy", "--store", uri]) == 0  # a forgotten message is not a lost one


def test_the_forget_command_needs_yes_and_names_a_missing_message(tmp_path, capsys):
    path = str(tmp_path / "thread.sqlite")
    with closing(sqlite3.connect(path, check_same_thread=False, isolation_level=None)) as conn:
        store = SqliteStore(conn)
        store.setup()
        paging = PagingMiddleware(max_tokens=400, boundary="fixed_2", store=store)
        agent = create_agent(
            ScriptedChatModel(responses=["Noted."] * 20),
            middleware=[paging],
            store=store,
            checkpointer=InMemorySaver(),
        )
        _turns(agent, {"configurable": {"thread_id": "t"}}, [HumanMessage(FACTS[0], id="m0"), *FACTS[1:10]])
    uri = f"sqlite:///{path}"
    assert cli(["forget", "t", "m0", "--store", uri]) == 2 or "pass --yes" in capsys.readouterr().err
    assert cli(["forget", "t", "no-such-message", "--store", uri, "--yes"]) == 1
    assert cli(["forget", "t", "m0", "--store", uri, "--yes"]) == 0
    assert "forgot message m0" in capsys.readouterr().out


def test_the_forget_command_forgets_a_message_of_a_thread_with_no_page_yet(tmp_path, capsys):
    """Checkpoints but no store record (below the budget). Before: "no such thread" (the command knew
    a thread by its records only) and the message stayed in the context. A message neither the pages
    nor the latest checkpoint hold is refused with nothing written."""
    path = str(tmp_path / "thread.sqlite")
    config = {"configurable": {"thread_id": "t"}}
    with _sqlite_file(path) as (store, saver):
        model = ScriptedChatModel(responses=["Noted."] * 4)
        agent = create_agent(
            model, middleware=[PagingMiddleware(max_tokens=800, store=store)], store=store, checkpointer=saver
        )
        agent.invoke({"messages": [HumanMessage("My locker code is Vrtojba77.", id="code")]}, config)
        uri = f"sqlite:///{path}"
        assert cli(["forget", "t", "no-such-message", "--store", uri, "--yes"]) == 1
        assert store.search(("langmem_paging",)) == [], "a refused forget writes nothing"
        assert cli(["forget", "t", "code", "--store", uri, "--yes"]) == 0
        assert "forgot message code in no page" in capsys.readouterr().out
        assert "Vrtojba77" not in repr(saver.get_tuple(config).checkpoint["channel_values"])
        agent.invoke({"messages": [HumanMessage("Anything else?")]}, config)
        assert "Vrtojba77" not in " ".join(str(m.content) for m in model.prompts[-1])


@pytest.mark.parametrize("mode", ["view"])
def test_in_view_mode_a_message_edited_after_it_was_paged_is_recalled_as_edited(mode):
    store = InMemoryStore()
    config = {"configurable": {"thread_id": "t"}}
    paging = PagingMiddleware(max_tokens=500, boundary="fixed_2", mode=mode, store=store)
    model = ScriptedChatModel(
        responses=["Noted."] * 14
        + [AIMessage("", tool_calls=[{"name": "recall", "args": {"page_ids": ["p1"]}, "id": "r1"}]), "Done."]
    )
    agent = create_agent(model, middleware=[paging], store=store, checkpointer=InMemorySaver())
    _turns(agent, config, [HumanMessage("My locker code is 1234.", id="locker"), *FACTS[:13]])
    assert any(m.id == "locker" for m in paging.page_store.get("t", "p1").messages), "the message was paged"
    agent.update_state(config, {"messages": [HumanMessage("My locker code is 9876.", id="locker")]})
    values = agent.invoke({"messages": ["What is my locker code?"]}, config)
    result = next(m for m in values["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == "r1")
    assert "9876" in result.content and "1234" not in result.content
