"""Every `SearchIndex` implementation for a test, and an empty Postgres index.

The index conformance files (tests/index/test_search_index.py, test_index_lifecycle.py,
test_index_repair.py) parametrize over ``"bm25"``, ``"sqlite"`` and ``"postgres"`` with one rule:
a Postgres index starts empty in every table it keeps (passages, per-thread frequencies, and how
far it holds each thread), so no test sees another's threads.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from langmem_paging.core.records import Page, messages_digest
from langmem_paging.index.base import InMemoryBM25Index, SearchIndex
from langmem_paging.index.postgres import PostgresSearchIndex
from langmem_paging.index.sqlite import SqliteSearchIndex

INDEXES = ["bm25", "sqlite", "postgres"]


def empty_postgres_index(dsn: str) -> PostgresSearchIndex:
    """A `PostgresSearchIndex` on `dsn` with its tables created and emptied."""
    index = PostgresSearchIndex(dsn)
    index.drop("__setup__")  # creates the tables on first use
    with index._connection() as conn:
        conn.execute(f"TRUNCATE {index.table}, {index.terms}, {index.threads}")
    return index


def make_index(request: pytest.FixtureRequest, tmp_path: Path, database_fixture: str) -> SearchIndex:
    """The index `request.param` names (a Postgres one on the database fixture named, closed after
    the test)."""
    if request.param == "bm25":
        return InMemoryBM25Index()
    if request.param == "sqlite":
        return SqliteSearchIndex(str(tmp_path / "index.db"))
    index = empty_postgres_index(request.getfixturevalue(database_fixture))
    request.addfinalizer(index.close)
    return index


def text_page(n: int, *texts: str) -> Page:
    """Page ``p{n}`` of `texts`, a user's and the assistant's turns by turns (ids ``m{n}_{k}``)."""
    messages = [
        (HumanMessage if k % 2 == 0 else AIMessage)(text, id=f"m{n}_{k}") for k, text in enumerate(texts)
    ]
    return Page(
        id=f"p{n}",
        messages=messages,
        bookmark=f"[p{n}:x]",
        keywords=[],
        token_count=9,
        boundary="fixed_2",
        created_turn=n,
        digest=messages_digest(messages),
    )
