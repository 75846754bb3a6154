"""Production v5, items 2-4 and 9: one lifecycle entry point (`paging.forget`, `paging.delete_thread`).

Before: `paging.page_store.forget(thread, msg)` never reached an index given to the middleware, nor
another worker's in-process index; without `graph=` the checkpointed bookmarks kept the forgotten
words and the next prompt showed them; a forget cut short after its store write and run again never
corrected the state's cluster bookmark (the re-run saw nothing removed).

Done when (each store with its default index, and with an explicitly given SQLite/Postgres index):
after `paging.forget` with no graph, a scan of every store record, every text column of every table of
the SQLite file or Postgres database, and the latest checkpoint finds no word only the forgotten
message held, and the next prompt shows none; `paging.delete_thread` leaves no row of the thread.
"""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import threading
from contextlib import closing
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.store.base import BaseStore, GetOp
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from langmem_paging.cli import main as cli
from langmem_paging.core.effects import ask, run
from langmem_paging.core.errors import PageStoreError
from langmem_paging.index.base import InMemoryBM25Index
from langmem_paging.index.sqlite import SqliteSearchIndex
from langmem_paging.ops.where import where_text
from langmem_paging.recall.io import Search
from langmem_paging.runtime.thread_io import ThreadIO
from langmem_paging.storage.page_store import ClaimedWrite, PageStore
from langmem_paging.testing.faults import FaultInjectingStore
from tests.support.backends import DATABASE_OF
from tests.support.indexes import empty_postgres_index
from tests.support.scenario_helpers import scripted_agent

SECRET = "Quixotrix"
CARD = f"My card is 4929 1234 5678 9012, under the name {SECRET}. Keep it."
ONLY_IN_CARD = ("4929", "1234", "5678", "9012", SECRET)
FACTS = [f"Note {i}: my neighbour Zarko{i} keeps {i + 2} beehives near Lake Bled{i}." for i in range(16)]
THREAD = "privacy"
CONFIG = {"configurable": {"thread_id": THREAD}}


def _sqlite_file(request, tmp_path):
    conn = sqlite3.connect(str(tmp_path / "pages.sqlite"), check_same_thread=False, isolation_level=None)
    request.addfinalizer(conn.close)
    store = SqliteStore(conn)
    store.setup()
    return store


@pytest.fixture(params=["memory", "sqlite", "postgres", "sqlite+index", "postgres+index"])
def backend(request, tmp_path):
    """(store, the index given to the middleware or None, the database to scan: a path, a DSN or None)."""
    kind = request.param
    if kind == "memory":
        return InMemoryStore(), None, None
    if kind.startswith("sqlite"):
        store = _sqlite_file(request, tmp_path)
        path = str(tmp_path / "pages.sqlite")
        return store, (SqliteSearchIndex(path) if kind.endswith("index") else None), path
    store = request.getfixturevalue("postgres_store")
    dsn = DATABASE_OF[store]
    index = empty_postgres_index(dsn)  # (emptied: the database outlives a test)
    request.addfinalizer(index.close)
    return store, (index if kind.endswith("index") else None), dsn


def _agent(store, index=None, responses=("Noted.",) * 40):
    return scripted_agent(476, store=store, index=index, responses=list(responses))


def _converse(agent, *, quote: bool = False) -> None:
    agent.invoke({"messages": [HumanMessage(CARD, id="card")]}, CONFIG)
    for i, fact in enumerate(FACTS):
        if quote and i == 3:
            fact = f"{fact} My friend {SECRET} called."
        agent.invoke({"messages": [HumanMessage(fact, id=f"fact{i}")]}, CONFIG)


def _hits(text: str, words=ONLY_IN_CARD) -> list[str]:
    """The words `text` holds as words, each with the text around it (what a failure shows). A float's
    digits are no card number, nor a group of a message's uuid: ``lc_run--01a2272d-fab3-73f6-9264-...``
    holds a four-digit group now and then (the likeliest cause of this file's rare failures this
    round: a 9012 in the checkpoint's text, in 2 of 7 whole-suite runs, never in 30+ runs alone)."""
    found = [(w, re.search(rf"(?<![\w.-]){re.escape(w)}(?![\w-])", text, re.IGNORECASE)) for w in words]
    return [f"{w} in ...{text[max(0, m.start() - 80) : m.end() + 40]}..." for w, m in found if m]


def _store_text(store) -> str:
    items = store.search(("langmem_paging",), limit=100_000)
    return json.dumps([[list(it.namespace), it.key, it.value] for it in items], default=str)


def _database_text(database) -> str:
    """Every text value of every table of the SQLite file or the Postgres database."""
    if database is None:
        return ""
    if not database.startswith("postgres"):
        with closing(sqlite3.connect(database)) as raw:
            tables = [r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            return " ".join(
                v
                for t in tables
                for row in raw.execute(f'SELECT * FROM "{t}"')
                for v in row
                if isinstance(v, str)
            )
    import psycopg

    with psycopg.connect(database) as conn:
        columns = conn.execute(
            "SELECT table_schema, table_name, column_name FROM information_schema.columns "
            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') "
            "AND data_type IN ('text', 'character varying', 'jsonb', 'json', 'tsvector', 'ARRAY')"
        ).fetchall()
        return " ".join(
            str(v)
            for schema, table, column in columns
            for (v,) in conn.execute(f'SELECT "{column}"::text FROM "{schema}"."{table}"').fetchall()
            if v is not None
        )


def _checkpoint_text(agent) -> str:
    values = agent.get_state(CONFIG).values
    messages = [m.model_dump() for m in values.get("messages", [])]
    return json.dumps([values.get("paging"), messages], default=str)


def _next_prompt(agent, model) -> str:
    agent.invoke({"messages": ["Anything else?"]}, CONFIG)
    return " ".join(str(m.content) for m in model.prompts[-1])


def _searched(paging, word) -> list:
    """What a recall's search finds (through the flow the recall tool runs: the index follows the store)."""
    page_store = paging.page_store
    io = ThreadIO(page_store, paging.pager.index_for(page_store), THREAD)
    return run(_search(word), io)


def _search(word):
    return (yield from ask(Search(word, 10, lambda p: True)))


def test_forget_with_no_graph_leaves_no_word_anywhere_and_the_next_prompt_shows_none(backend):
    store, index, database = backend
    agent, paging, model = _agent(store, index)
    _converse(agent)
    assert _hits(_store_text(store)) and _searched(paging, "4929"), "the card was paged and indexed"
    assert any(SECRET in p.bookmark for p in paging.page_store.list_clusters(THREAD)), "a cluster named it"
    assert _hits(_checkpoint_text(agent)), "the checkpointed bookmarks named it"

    assert paging.forget(THREAD, "card")  # no graph, no checkpointer

    assert _hits(_store_text(store)) == []
    assert _hits(_database_text(database)) == []
    assert [w for w in ONLY_IN_CARD if _searched(paging, w)] == []
    assert _hits(_next_prompt(agent, model)) == []
    assert _hits(_checkpoint_text(agent)) == []  # the step that built the prompt wrote the state
    assert _searched(paging, "Zarko5 beehives"), "the rest of the thread is still found"


def test_delete_thread_leaves_no_row_of_the_thread(backend):
    store, index, database = backend
    agent, paging, _ = _agent(store, index)
    _converse(agent)
    assert _searched(paging, "Zarko3")

    assert paging.delete_thread(THREAD) > 0

    assert store.search(("langmem_paging",), limit=10) == []
    assert THREAD not in _database_text(database)
    assert _hits(_database_text(database), ("Zarko", "4929")) == []


def test_a_delete_cut_short_after_its_index_drop_converges(backend, monkeypatch):
    """`delete_thread` drops the index rows first (a record's delete then has no passage to follow):
    cut short right after, the pages are still stored and still found (the index loads them again),
    and a re-run leaves no row of the thread."""
    store, index, database = backend
    agent, paging, _ = _agent(store, index)
    _converse(agent)

    def cut(self, thread_id):
        raise RuntimeError("killed after the index drop")
        yield  # a generator of batches, as `PageStore._delete_thread` is

    with monkeypatch.context() as patch:
        patch.setattr(PageStore, "_delete_thread", cut)
        with pytest.raises(Exception, match="killed after the index drop"):
            paging.delete_thread(THREAD)
    assert _searched(paging, "Zarko3"), "cut short: the pages are still stored, and found"

    assert paging.delete_thread(THREAD) > 0
    assert store.search(("langmem_paging",), limit=10) == []
    assert THREAD not in _database_text(database)


def test_the_cli_forget_is_the_same_entry_point(backend, capsys):
    store, index, database = backend
    if database is None:
        pytest.skip("the command line opens a store by URI: an InMemoryStore has none")
    agent, paging, model = _agent(store, index)
    _converse(agent)
    uri = database if database.startswith("postgres") else f"sqlite:///{database}"
    assert cli(["forget", THREAD, "card", "--store", uri, "--checkpoints", "none", "--yes"]) == 0
    assert "next step corrects its state" in capsys.readouterr().out
    assert _hits(_store_text(store)) == []
    assert _hits(_database_text(database)) == []
    assert [w for w in ONLY_IN_CARD if _searched(paging, w)] == []
    assert _hits(_next_prompt(agent, model)) == []  # the agent's checkpoints were never opened
    assert _hits(_checkpoint_text(agent)) == []
    assert cli(["where", THREAD, "--text", "4929", "--store", uri, "--checkpoints", "none"]) == 0


# -- convergence: cut short anywhere, run again ------------------------------------------------------


class _FailingUpdate:
    """A compiled graph whose `update_state` fails (the state write of a forget)."""

    def __init__(self, graph):
        self.graph = graph

    def get_state(self, config):
        return self.graph.get_state(config)

    def update_state(self, config, values):
        raise RuntimeError("checkpointer down")


def _state_places(agent, paging, word):
    values = agent.get_state(CONFIG).values
    places = where_text(
        paging.page_store, THREAD, word, paging=values.get("paging"), messages=values.get("messages", [])
    )
    return [p for p in places if p.place.startswith("state")]


def test_a_rerun_after_a_failed_state_write_corrects_the_state_cluster_bookmarks(backend):
    store, index, database = backend
    agent, paging, model = _agent(store, index)
    _converse(agent)
    assert _state_places(agent, paging, SECRET), "the state showed it"
    with pytest.raises(RuntimeError, match="checkpointer down"):
        paging.forget(THREAD, "card", graph=_FailingUpdate(agent))
    assert _state_places(agent, paging, SECRET), "the store is scrubbed, the state is not"

    paging.forget(THREAD, "card", graph=agent)  # the re-run: nothing left to remove from the records

    assert _state_places(agent, paging, SECRET) == []
    assert _hits(_store_text(store)) == [] and _hits(_database_text(database)) == []
    assert _hits(_next_prompt(agent, model)) == []


class _FailingIndex(InMemoryBM25Index):
    def __init__(self):
        super().__init__()
        self.fail = True

    def update(self, thread_id, pages):
        if self.fail:
            self.fail = False
            raise ConnectionError("index down")
        super().update(thread_id, pages)


def test_a_failed_index_write_then_a_rerun_converges():
    index = _FailingIndex()
    agent, paging, model = _agent(InMemoryStore(), index)
    _converse(agent)
    assert _searched(paging, "4929")
    with pytest.raises(ConnectionError):
        paging.forget(THREAD, "card")
    assert [w for w in ONLY_IN_CARD if _searched(paging, w)] == []  # the index follows the generation
    assert paging.forget(THREAD, "card")
    assert [w for w in ONLY_IN_CARD if _searched(paging, w)] == []
    assert _hits(_next_prompt(agent, model)) == []


def _cut_at(call: int, operation: Any) -> tuple[FaultInjectingStore, Any, Any, Any]:
    """A conversation on a store whose `call`-th store call during `operation` fails once (after
    landing, for a write), with no retry: the operation raises, and the store is left as it cut."""
    faulty = FaultInjectingStore(InMemoryStore(), landed=1.0)
    agent, paging, model = _agent(faulty)
    paging.page_store.retries = 0
    _converse(agent)
    faulty.arm(fail_at=[call])
    with pytest.raises(PageStoreError):
        operation(paging)
    return faulty, agent, paging, model


@pytest.mark.parametrize("call", range(1, 8))
def test_a_forget_cut_at_any_store_call_converges_on_a_rerun(call):
    """The forget's store calls: lifecycle, its intent written (2nd), high-water mark, pages, clusters,
    sketch, the write (7th): each fails once (after landing, for the writes), the re-run converges."""
    faulty, agent, paging, model = _cut_at(call, lambda paging: paging.forget(THREAD, "card"))
    assert paging.forget(THREAD, "card")
    assert _hits(_store_text(faulty.store)) == []
    assert [w for w in ONLY_IN_CARD if _searched(paging, w)] == []
    assert _hits(_next_prompt(agent, model)) == []


@pytest.mark.parametrize("call", range(1, 7))
def test_a_delete_cut_at_any_store_call_converges_on_a_rerun(call):
    """The delete's store calls after its index drop: a listing per kind of record (5), the deletes (6th):
    each fails once (after landing, for the deletes), the re-run leaves no record and no index row."""
    faulty, _, paging, _ = _cut_at(call, lambda paging: paging.delete_thread(THREAD))
    assert _searched(paging, "Zarko3") != (call == 6), "cut before its deletes: still stored and found"
    paging.delete_thread(THREAD)
    assert faulty.store.search(("langmem_paging",), limit=10) == []
    assert [w for w in ("Zarko3", *ONLY_IN_CARD) if _searched(paging, w)] == []


def test_forget_is_idempotent_and_a_rerun_changes_no_record():
    store = InMemoryStore()
    agent, paging, _ = _agent(store)
    _converse(agent)
    first = paging.forget(THREAD, "card")
    records = _store_text(store)
    assert paging.forget(THREAD, "card") == first
    assert _store_text(store) == records


# -- other workers, async, quoted words --------------------------------------------------------------


def test_another_workers_in_process_index_follows_a_forget_and_a_delete():
    store = InMemoryStore()
    agent, paging, _ = _agent(store)
    worker, worker_paging, _ = _agent(store, InMemoryBM25Index())  # another process's own index
    _converse(agent)
    assert _searched(worker_paging, "4929")  # the worker loaded the thread

    paging.forget(THREAD, "card")  # never reaches the worker's index object
    assert [w for w in ONLY_IN_CARD if _searched(worker_paging, w)] == []

    paging.delete_thread(THREAD)
    later = [f"Day {i}: the ferry to Vis{i} leaves at {i + 6} from pier Okrug{i}." for i in range(16)]
    again, _, _ = _agent(store)
    for text in later:
        again.invoke({"messages": [text]}, CONFIG)
    assert _searched(worker_paging, "Okrug2 ferry")
    assert _searched(worker_paging, "Zarko3") == []


def test_aforget_and_adelete_thread():
    store = InMemoryStore()
    agent, paging, model = _agent(store)
    _converse(agent)

    async def go():
        assert await paging.aforget(THREAD, "card")
        assert _hits(_store_text(store)) == []
        await agent.ainvoke({"messages": ["Anything else?"]}, CONFIG)  # the async step follows too
        assert _hits(" ".join(str(m.content) for m in model.prompts[-1])) == []
        assert _hits(_checkpoint_text(agent)) == []
        assert await paging.adelete_thread(THREAD) > 0

    asyncio.run(go())
    assert store.search(("langmem_paging",), limit=10) == []


def test_words_another_message_quotes_stay_and_where_names_that_message():
    store = InMemoryStore()
    agent, paging, model = _agent(store)
    _converse(agent, quote=True)
    paging.forget(THREAD, "card")
    places = where_text(paging.page_store, THREAD, SECRET, index=paging.pager.index_for(paging.page_store))
    held = {p.held_by for p in places}
    assert held and all(h.endswith(" fact3") for h in held), places
    assert _hits(_store_text(store), ONLY_IN_CARD[:4]) == []


def test_a_forget_while_another_thread_pages_the_same_thread_stays_consistent():
    store = InMemoryStore()
    agent, paging, model = _agent(store, responses=["Noted."] * 80)
    _converse(agent)
    errors: list[BaseException] = []

    def keep_paging():
        try:
            for i in range(12):
                agent.invoke({"messages": [f"Later {i}: the tram to Gorica{i} runs at {i}."]}, CONFIG)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    worker = threading.Thread(target=keep_paging)
    worker.start()
    paging.forget(THREAD, "card")
    worker.join()
    assert errors == []
    assert _hits(_store_text(store)) == []
    assert [w for w in ONLY_IN_CARD if _searched(paging, w)] == []
    assert _hits(_next_prompt(agent, model)) == []
    assert _hits(_checkpoint_text(agent)) == []


class _ForgetDuringStep(BaseStore):
    """A store on which a forget lands while a step runs: just before the step's commit reads."""

    def __init__(self, inner):
        self.inner, self.armed, self.landed = inner, False, 0

    def batch(self, ops):
        ops = list(ops)
        keys = {op.key for op in ops if isinstance(op, GetOp)}
        if self.armed and {"next", "lifecycle"} <= keys:  # the commit's read
            self.armed, self.landed = False, self.landed + 1
            PageStore(self.inner).forget(THREAD, "card")
        return self.inner.batch(ops)

    async def abatch(self, ops):
        return self.batch(ops)


def _card_late(agent, store=None, arm_at=None) -> int | None:
    """Facts, then the card, then facts: the turn whose step first pages the card (pages exist then)."""
    texts = [*FACTS, CARD, *(f"Later {i}: the tram to Gorica{i} runs at {i}." for i in range(16))]
    for turn, text in enumerate(texts):
        if store is not None and turn == arm_at:
            store.armed = True
        agent.invoke({"messages": [HumanMessage(text, id="card" if text == CARD else f"m{turn}")]}, CONFIG)
        if arm_at is None and _hits(_store_text(agent_store(agent))):
            return turn
    return None


def agent_store(agent):
    return agent.store


def test_a_forget_landing_while_a_step_pages_the_message_is_not_undone_by_the_steps_commit():
    """The step pages the card; the forget lands between the step's start and its commit. Before: the
    commit wrote the card's page after the forget (the forget had found no page holding it)."""
    dry, _, _ = _agent(InMemoryStore())
    paged_at = _card_late(dry)
    assert paged_at is not None
    store = _ForgetDuringStep(InMemoryStore())
    agent, paging, model = _agent(store)
    _card_late(agent, store, arm_at=paged_at)
    assert store.landed == 1
    assert _hits(_store_text(store.inner)) == []
    assert [w for w in ONLY_IN_CARD if _searched(paging, w)] == []
    assert _hits(_next_prompt(agent, model)) == []
    assert _hits(_checkpoint_text(agent)) == []


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"], indirect=True)
def test_a_forget_landing_between_the_commits_read_and_its_write_refuses_the_commit(backend, monkeypatch):
    """The forget lands after the step's commit read the lifecycle record and before its write: the
    write's transaction reads the record again and refuses, the step goes again from the records.
    Before: the commit wrote the card's page after the forget (which had found no page holding it)."""
    store, index, database = backend
    dry, _, _ = _agent(InMemoryStore())
    paged_at = _card_late(dry)
    assert paged_at is not None
    landed: list[str] = []
    write = PageStore._batch

    def forget_first(self, ops):
        if isinstance(ops, ClaimedWrite) and armed and not landed:
            landed.append(ops.thread_id)
            PageStore(self.store).forget(THREAD, "card")
        return write(self, ops)

    monkeypatch.setattr(PageStore, "_batch", forget_first)
    agent, paging, model = _agent(store, index)
    texts = [*FACTS, CARD, *(f"Later {i}: the tram to Gorica{i} runs at {i}." for i in range(16))]
    for turn, text in enumerate(texts):
        armed = turn == paged_at
        agent.invoke({"messages": [HumanMessage(text, id="card" if text == CARD else f"m{turn}")]}, CONFIG)
    assert landed == [THREAD]
    assert _hits(_store_text(store)) == []
    assert _hits(_database_text(database)) == []
    assert [w for w in ONLY_IN_CARD if _searched(paging, w)] == []
    assert _hits(_next_prompt(agent, model)) == []
    assert _hits(_checkpoint_text(agent)) == []


def test_view_mode_the_next_prompt_and_the_paging_state_follow_without_a_graph():
    """View mode keeps the whole history in the state: the next prompt and the paging state follow the
    forget; the history's copy of the message goes with `graph=`/`checkpointer=` (documented)."""
    agent, paging, model = scripted_agent(600, mode="view", responses=["Noted."] * 40)
    _converse(agent)
    assert _hits(" ".join(str(m.content) for m in model.prompts[-1]))
    paging.forget(THREAD, "card")
    assert _hits(_next_prompt(agent, model)) == []
    assert _hits(json.dumps(agent.get_state(CONFIG).values["paging"])) == []
    paging.forget(THREAD, "card", graph=agent)
    assert _hits(_checkpoint_text(agent)) == []


def test_a_recall_listing_a_clusters_pages_loses_the_forgotten_words():
    """A recall of a cluster lists its pages' bookmarks (ids only in the spec's cluster item, not in
    `recalled`): after a forget, that listing in the state still showed the page's old bookmark (the
    operators' `where` transcript). It shrinks to a reference, which re-expands from the scrubbed records."""
    from langchain_core.messages import AIMessage

    def answer(prompt):
        last = prompt[-1]
        if isinstance(last, HumanMessage) and "list the cluster" in str(last.content):
            cluster = re.search(r"\[(c\d+):", " ".join(str(m.content) for m in prompt)).group(1)
            return AIMessage("", tool_calls=[{"name": "recall", "args": {"page_ids": [cluster]}, "id": "r1"}])
        return "Noted."

    store = InMemoryStore()
    agent, paging, model = _agent(store, responses=[answer] * 60)
    _converse(agent)
    agent.invoke({"messages": ["Please list the cluster of my notes."]}, CONFIG)
    listing = next(m for m in agent.get_state(CONFIG).values["messages"] if m.type == "tool")
    assert "=== c" in listing.content and _hits(listing.content), listing.content  # the card page's bookmark
    paging.forget(THREAD, "card")
    assert _hits(_next_prompt(agent, model)) == []
    assert _hits(_checkpoint_text(agent)) == []


# -- a message never paged (issue 30) ----------------------------------------------------------------


@pytest.mark.parametrize("run_forget", ["sync", "async"])
def test_forget_of_a_message_never_paged_reaches_the_next_prompt_and_the_checkpoint(backend, run_forget):
    """A thread below its budget has no page record. Before: the forget returned early with no
    lifecycle record, so the next step never learnt of it and the card stayed in the checkpointed
    messages and the next prompt."""
    store, index, database = backend
    agent, paging, model = _agent(store, index)
    agent.invoke({"messages": [HumanMessage(CARD, id="card")]}, CONFIG)
    agent.invoke({"messages": [HumanMessage(FACTS[0], id="fact0")]}, CONFIG)
    assert paging.page_store.list_pages(THREAD) == [], "nothing was paged: the card is resident"
    assert _hits(_checkpoint_text(agent))

    if run_forget == "sync":
        assert paging.forget(THREAD, "card") == []  # no graph, no checkpointer; no page holds it
    else:
        assert asyncio.run(paging.aforget(THREAD, "card")) == []
    records = _store_text(store)
    assert paging.forget(THREAD, "card") == [] and _store_text(store) == records  # a re-run converges

    assert _hits(_next_prompt(agent, model)) == []
    assert _hits(_checkpoint_text(agent)) == []
    assert _hits(_store_text(store)) == [] and _hits(_database_text(database)) == []
    assert "Zarko0" in _next_prompt(agent, model), "the rest of the thread stays"

    assert paging.delete_thread(THREAD) > 0  # the lifecycle record goes with the thread
    assert store.search(("langmem_paging",), limit=10) == []
    assert THREAD not in _database_text(database)


@pytest.mark.parametrize("call", range(1, 7))
def test_a_forget_of_a_message_never_paged_cut_at_any_store_call_converges_on_a_rerun(call):
    """Its store calls: lifecycle, its intent written (2nd), high-water mark, the listing, sketch, the
    write (6th, failing after it landed): each fails once, the re-run converges on one record naming
    the message."""
    faulty = FaultInjectingStore(InMemoryStore(), landed=1.0)
    agent, paging, model = _agent(faulty)
    paging.page_store.retries = 0
    agent.invoke({"messages": [HumanMessage(CARD, id="card")]}, CONFIG)
    faulty.arm(fail_at=[call])
    with pytest.raises(PageStoreError):
        paging.forget(THREAD, "card")
    assert faulty.calls == call, "the forget makes five store calls"
    assert paging.forget(THREAD, "card") == []
    assert list(paging.page_store.get_lifecycle(THREAD).forgotten) == ["card"]
    assert _hits(_next_prompt(agent, model)) == []
    assert _hits(_checkpoint_text(agent)) == []


def test_forget_of_a_resident_message_in_view_mode_reaches_the_next_prompt():
    """View mode keeps the whole history in the state (its copy goes with `graph=`); the prompt and
    the paging state follow the forget of a message never paged."""
    agent, paging, model = scripted_agent(600, mode="view", responses=["Noted."] * 10)
    agent.invoke({"messages": [HumanMessage(CARD, id="card")]}, CONFIG)
    assert paging.page_store.list_pages(THREAD) == []
    paging.forget(THREAD, "card")
    assert _hits(_next_prompt(agent, model)) == []
    assert _hits(_next_prompt(agent, model)) == [], "a later step does not show it again"
    assert _hits(json.dumps(agent.get_state(CONFIG).values["paging"])) == []
