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
from langmem_paging.integrations.pager import Pager
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
