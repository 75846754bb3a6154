"""One durable commit per store for a step that pages (issue "Production v5", item 3): the page-number
claims are written in the transaction of the records, not each in its own before them (two claims took
43 ms of a 139 ms search turn on a SQLite file). Two writers on two branches of a thread still never
get one number with different content: a commit whose number another writer claimed since the step
reserved it writes nothing, and the step runs again past it."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from langchain_core.messages import HumanMessage
from langgraph.store.sqlite import SqliteStore

from langmem_paging import PageStore, PagingConfig
from langmem_paging.core.records import Page, messages_digest
from langmem_paging.core.state import PagingState
from langmem_paging.runtime.pager import Pager
from tests.support.backends import run_coroutine
from tests.support.conversations import town_turns


def _page(n: int, text: str) -> Page:
    messages = [HumanMessage(text, id=f"x{n}")]
    return Page(
        id=f"p{n}",
        messages=messages,
        bookmark=f"[p{n}:x]",
        keywords=["x"],
        token_count=5,
        boundary="fixed_1",
        created_turn=n,
        digest=messages_digest(messages),
    )


def _step(pager: Pager, messages: list, value: dict, mode: str):
    if mode == "sync":
        return pager.step(messages, value, "t")
    return asyncio.run(pager.astep(messages, value, "t"))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_paging_step_on_a_sqlite_file_claims_its_numbers_in_the_records_transaction(tmp_path, mode):
    conn = sqlite3.connect(str(tmp_path / "store.db"), check_same_thread=False, isolation_level=None)
    store = SqliteStore(conn)
    store.setup()
    pager = Pager(PagingConfig(max_tokens=300, boundary="fixed_2"), PageStore(store))
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    result = _step(pager, town_turns(12), {}, mode)
    assert result.pages  # the step paged
    transactions, current = [], []
    for sql in statements:
        if sql.startswith("BEGIN"):
            current = []
        elif sql == "COMMIT":
            transactions.append(current)
        else:
            current.append(sql)
    claims = [t for t in transactions if any("INTO langmem_paging_claims" in s for s in t)]
    records = [t for t in transactions if any("INTO store" in s for s in t)]
    assert len(claims) == 1 and claims == records  # one transaction: the claims with the records


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_number_claimed_by_another_writer_since_reserve_writes_nothing(base_store, mode):
    pages = PageStore(base_store)
    mine, theirs = _page(1, "mine: the heron"), _page(1, "theirs: the otter")

    def run(call, *args, **kwargs):
        if mode == "sync":
            return getattr(pages, call)(*args, **kwargs)
        return run_coroutine(getattr(pages, "a" + call)(*args, **kwargs), base_store)

    state = PagingState()
    assert run("reserve", "t", "p", [mine.digest], state) == [1]
    assert run("commit", "t", pages=[theirs], nodes=[], state=PagingState(next={"p": 2, "c": 1})) is True
    assert run("commit", "t", pages=[mine], nodes=[], state=state) is False  # refused: nothing written
    assert pages.get("t", "p1").messages[0].content == "theirs: the otter"
    assert run("reserve", "t", "p", [mine.digest], PagingState()) == [2]  # a new step goes past it
    assert (
        run("commit", "t", pages=[theirs], nodes=[], state=PagingState(next={"p": 2, "c": 1})) is True
    )  # a retry


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_step_whose_number_another_writer_took_meanwhile_steps_again_past_it(tmp_path, monkeypatch, mode):
    store = SqliteStore(
        sqlite3.connect(str(tmp_path / "s.db"), check_same_thread=False, isolation_level=None)
    )
    store.setup()
    other = PageStore(store)
    intruder = _page(1, "another branch's page")
    real_write = type(other)._commit
    raced = []

    def racing_commit(self, thread_id, pages, *args, **kwargs):
        if pages and not raced:  # another worker commits p1 between this step's reserve and commit
            raced.append(True)
            other.commit(thread_id, pages=[intruder], nodes=[], state=PagingState(next={"p": 2, "c": 1}))
        return real_write(self, thread_id, pages, *args, **kwargs)

    monkeypatch.setattr(PageStore, "_commit", racing_commit)
    pager = Pager(PagingConfig(max_tokens=300, boundary="fixed_2"), PageStore(store))
    result = _step(pager, town_turns(12), {}, mode)
    assert raced and result.pages and "p1" not in {p.id for p in result.pages}
    assert other.get("t", "p1").messages == intruder.messages
    for page in result.pages:
        assert other.get("t", page.id).digest == page.digest


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_claims_and_the_records_are_one_transaction_a_failed_write_leaves_neither(
    base_store, mode, monkeypatch
):
    import inspect

    from langgraph.store.memory import InMemoryStore

    from langmem_paging.core.errors import PageStoreError
    from langmem_paging.storage.claims import claims_for

    if isinstance(base_store, InMemoryStore):
        pytest.skip("in-process claims are claimed first, then the records written")
    pages = PageStore(base_store, retries=0)
    page = _page(1, "the heron")

    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    async def abroken(*args, **kwargs):
        raise RuntimeError("disk full")

    writer = base_store._batch_put_ops
    monkeypatch.setattr(
        base_store, "_batch_put_ops", abroken if inspect.iscoroutinefunction(writer) else broken
    )
    commit = (
        pages.commit
        if mode == "sync"
        else (lambda *a, **k: run_coroutine(pages.acommit(*a, **k), base_store))
    )
    with pytest.raises(PageStoreError, match="disk full"):
        commit("t", pages=[page], nodes=[], state=PagingState(next={"p": 2, "c": 1}))
    monkeypatch.undo()
    assert claims_for(base_store).held("t", "p", [1]) == {}  # the claim rolled back with the records
    assert pages.get("t", "p1") is None
    assert commit("t", pages=[page], nodes=[], state=PagingState(next={"p": 2, "c": 1})) is True
    assert claims_for(base_store).held("t", "p", [1]) == {1: page.digest}


# -- the passages in the same transaction (issue "Production v5", item 10) -------------------------


def _write_commits(conn: sqlite3.Connection) -> list[int]:
    """Trace `conn`: for each COMMIT of a transaction that changed rows, how many rows it changed."""
    commits: list[int] = []
    began = [conn.total_changes]

    def trace(sql: str) -> None:
        if sql.startswith("BEGIN"):
            began[0] = conn.total_changes
        elif sql == "COMMIT" and conn.total_changes > began[0]:
            commits.append(conn.total_changes - began[0])

    conn.set_trace_callback(trace)
    return commits


def _file_store(tmp_path) -> SqliteStore:
    store = SqliteStore(
        sqlite3.connect(str(tmp_path / "store.db"), check_same_thread=False, isolation_level=None)
    )
    store.setup()
    return store


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_paging_step_makes_one_durable_commit_on_the_store_file_passages_included(tmp_path, mode):
    """The passages were written in a transaction of their own after the records' (two durable
    commits per paging step on the store's file)."""
    store = _file_store(tmp_path)
    pager = Pager(PagingConfig(max_tokens=300, boundary="fixed_2"), PageStore(store))
    commits = _write_commits(store.conn)
    result = _step(pager, town_turns(12), {}, mode)
    store.conn.set_trace_callback(None)
    assert result.pages  # the step paged
    assert len(commits) == 1, f"{len(commits)} write transactions committed on the store file"
    index = pager.index_for(pager.page_store)
    assert index.indexed_through("t") == max(int(p.id[1:]) for p in result.pages)
    hits = index.search("t", "bridges Town2", limit=5, allow=lambda p: True)
    assert hits, "the step's passages are searchable"


class _IndexBroken(Exception):
    pass


def _break_index(store, monkeypatch) -> None:
    """Make the index's passage statement fail inside the transaction of the records."""
    from langmem_paging.index import postgres, sqlite

    if isinstance(store, SqliteStore):

        def broken(self, thread_id, pages):
            self._conn.execute(
                "INSERT INTO langmem_paging_fts_threads (thread_id) VALUES ('~')"
            )  # a row written
            raise sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(sqlite.SqliteSearchIndex, "_insert", broken)
    else:

        def abroken(self, thread_id, pages):
            yield postgres._Statement("SELECT 1 / 0")  # division by zero: the transaction aborts

        monkeypatch.setattr(postgres.PostgresSearchIndex, "_insert", abroken)


@pytest.fixture(params=["sqlite file", "postgres", "apostgres"])
def joined_store(request, tmp_path):
    """A store whose default index writes in the transaction of its records."""
    if request.param == "sqlite file":
        return _file_store(tmp_path)
    return request.getfixturevalue(
        "postgres_store" if request.param == "postgres" else "apostgres_store_on_loop"
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failed_passage_statement_rolls_back_the_records_and_the_claims(joined_store, mode, monkeypatch):
    from langmem_paging.core.errors import PageStoreError
    from langmem_paging.index.defaults import default_index
    from langmem_paging.storage.claims import Passages, claims_for

    pages = PageStore(joined_store, retries=0)
    index = default_index(joined_store)
    assert pages.indexes_with_records(index)
    page = _page(1, "the heron nests by the weir")

    def commit():
        state = PagingState(next={"p": 2, "c": 1})
        call = pages.commit if mode == "sync" else pages.acommit
        outcome = call("t", pages=[page], nodes=[], state=state, passages=Passages(index, [page]))
        return outcome if mode == "sync" else run_coroutine(outcome, joined_store)

    _break_index(joined_store, monkeypatch)
    with pytest.raises(PageStoreError):
        commit()
    monkeypatch.undo()
    assert pages.get("t", "p1") is None  # the records rolled back with the passages
    assert claims_for(joined_store).held("t", "p", [1]) == {}
    assert index.indexed_through("t") is None and index.indexed_through("~") is None
    assert commit() is True
    assert pages.get("t", "p1") is not None and index.indexed_through("t") == 1
    assert [h.page_id for h in index.search("t", "heron", limit=3, allow=lambda p: True)] == ["p1"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_step_whose_passages_fail_is_a_store_error_and_the_next_step_pages(tmp_path, mode, monkeypatch):
    """The turn behaves as a store failure does: "raise" raises `PageStoreError`, "continue" answers
    unpaged with a warning; nothing was written, and the next step pages and indexes."""
    import warnings

    from langmem_paging.core.errors import PageStoreError

    store = _file_store(tmp_path)
    config = PagingConfig(max_tokens=300, boundary="fixed_2")
    _break_index(store, monkeypatch)
    with pytest.raises(PageStoreError, match="disk I/O error"):
        _step(Pager(config, PageStore(store)), town_turns(12), {}, mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        unpaged = _step(Pager(config, PageStore(store), on_store_error="continue"), town_turns(12), {}, mode)
    assert not unpaged.pages and any("not paged" in str(w.message) for w in caught)
    assert PageStore(store).list_pages("t") == []
    monkeypatch.undo()
    pager = Pager(config, PageStore(store))
    result = _step(pager, town_turns(12), {}, mode)
    assert result.pages and len(PageStore(store).list_pages("t")) == len(result.pages)
    assert pager.index_for(pager.page_store).indexed_through("t") == len(result.pages)
