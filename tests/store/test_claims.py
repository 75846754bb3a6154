"""Number claims, on every backend: a number goes to one digest; the same digest is granted again (a
retried step); a thread's claims go with the thread."""

from __future__ import annotations

import asyncio
from contextlib import contextmanager

import pytest
from langgraph.store.memory import InMemoryStore

from langmem_paging.storage.claims import InProcessClaims, SqliteClaims, claims_for
from tests.support.backends import sqlite_store
from tests.support.postgres_server import fresh_database


@pytest.fixture(params=["in-process", "sqlite", "postgres"])
def claims(request, tmp_path):
    if request.param == "in-process":
        yield claims_for(InMemoryStore())
    elif request.param == "sqlite":
        yield claims_for(sqlite_store(str(tmp_path / "claims.db")))
    else:
        from langgraph.store.postgres import PostgresStore

        uri = fresh_database(request.getfixturevalue("postgres_uri"), "langmem_claims")
        with PostgresStore.from_conn_string(uri) as store:
            store.setup()
            yield claims_for(store)


def test_a_number_goes_to_one_digest_and_the_same_digest_again(claims):
    assert claims.claim("t", "p", [1, 2], ["a", "b"]) == [True, True]
    assert claims.claim("t", "p", [1, 2, 3], ["a", "x", "c"]) == [True, False, True]  # p2 is b's
    assert claims.claim("t", "c", [2], ["x"]) == [True]  # clusters are numbered apart
    assert claims.claim("u", "p", [2], ["x"]) == [True]  # and threads


def test_the_async_claim_agrees(claims):
    assert asyncio.run(claims.aclaim("t", "p", [5], ["a"])) == [True]
    assert claims.claim("t", "p", [5], ["b"]) == [False]


def test_dropping_a_thread_frees_its_numbers(claims):
    claims.claim("t", "p", [1], ["a"])
    claims.claim("u", "p", [1], ["a"])
    claims.drop("t")
    assert claims.claim("t", "p", [1], ["b"]) == [True]
    assert claims.claim("u", "p", [1], ["b"]) == [False]


def test_each_store_gets_claims_in_its_own_database(tmp_path):
    assert isinstance(claims_for(InMemoryStore()), InProcessClaims)
    store = sqlite_store(str(tmp_path / "s.db"))
    assert isinstance(claims_for(store), SqliteClaims) and claims_for(store) is claims_for(store)


def test_tasks_claiming_at_once_on_a_fresh_async_postgres_store_all_get_their_numbers(postgres_uri):
    # Every task finds the claims table missing and creates it: the losers of that race must go on
    # (50 threads stepped at once on one AsyncPostgresStore failed with a duplicate pg_type key).
    from langgraph.store.postgres.aio import AsyncPostgresStore

    uri = fresh_database(postgres_uri, "langmem_claims_race")

    async def run() -> list[list[bool]]:
        async with AsyncPostgresStore.from_conn_string(uri, pool_config={"max_size": 16}) as store:
            await store.setup()
            claims = claims_for(store)
            return await asyncio.gather(*(claims.aclaim(f"t{i}", "p", [1], ["a"]) for i in range(80)))

    assert asyncio.run(run()) == [[True]] * 80


def test_a_create_that_loses_the_race_with_type_already_exists_goes_on(postgres_uri, monkeypatch):
    # CI saw the race lost as DuplicateObject ("type langmem_paging_claims already exists"), which the
    # losers did not take for "the table exists": every kind of lost race must go on.
    import psycopg
    from langgraph.store.postgres import PostgresStore

    uri = fresh_database(postgres_uri, "langmem_claims_type_race")
    with PostgresStore.from_conn_string(uri) as store:
        store.setup()
        claims = claims_for(store)
        assert claims.claim("t", "p", [1], ["a"]) == [True]  # the table exists now
        claims._ready = False  # a second creator that has not seen it
        real_cursor = store._cursor

        class LosingCursor:
            def __init__(self, cur):
                self.cur = cur

            def execute(self, sql, params=()):
                if sql.startswith("CREATE"):
                    raise psycopg.errors.DuplicateObject('type "langmem_paging_claims" already exists')
                return self.cur.execute(sql, params)

            def __getattr__(self, name):
                return getattr(self.cur, name)

        @contextmanager
        def losing_cursor(*args, **kwargs):
            with real_cursor(*args, **kwargs) as cur:
                yield LosingCursor(cur)

        monkeypatch.setattr(store, "_cursor", losing_cursor)
        assert claims.claim("t", "p", [1, 2], ["a", "b"]) == [True, True]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_write_claims_both_kinds_at_once_and_one_refused_number_claims_none(claims, mode):
    """A step's write claims its page and cluster numbers together (one statement on Postgres, one
    insert and one read on SQLite): granted again for the same digests, and a cluster number another
    digest holds refuses the write with its page number left free (in-process claims are made
    first, one kind at a time: there the page number stays claimed)."""
    from langmem_paging.storage.claims import ClaimedWrite

    def write(wanted):
        request = ClaimedWrite("t", wanted, [])
        if mode == "sync":
            return claims.write(request, lambda ops: [])
        return asyncio.run(claims.awrite(request, _none))

    assert write([("p", 1, "a"), ("p", 2, "b"), ("c", 1, "x")])
    assert write([("p", 1, "a"), ("p", 2, "b"), ("c", 1, "x")])  # a retried step
    assert claims.held("t", "c", [1]) == {1: "x"} and claims.held("t", "p", [1, 2]) == {1: "a", 2: "b"}
    assert not write([("p", 3, "d"), ("c", 1, "other")])
    left = {} if not isinstance(claims, InProcessClaims) else {3: "d"}
    assert claims.held("t", "p", [3]) == left
    assert claims.claim("t", "c", [1, 2], ["x", "y"]) == [True, True]


async def _none(ops):
    return []
