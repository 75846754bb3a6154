"""No cold start: on a SQLite page store the search index lives in the store's own file, so a new
process (a restarted LangGraph worker) searches a thread without rebuilding its index.

`InMemoryBM25Index` re-tokenized every page of a thread on a process's first search (552 ms vs
48 ms warm at 753 pages; minutes at 100k pages)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from langgraph.store.memory import InMemoryStore

from langmem_paging import InMemoryBM25Index
from langmem_paging.index.defaults import default_index
from langmem_paging.index.sqlite import SqliteSearchIndex, sqlite_file_of
from tests.support.backends import sqlite_store

WRITER = """
import sqlite3, sys
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.sqlite import SqliteStore
from langmem_paging import PagingConfig, PageStore
from langmem_paging.runtime.pager import Pager
store = SqliteStore(sqlite3.connect(sys.argv[1], check_same_thread=False, isolation_level=None))
store.setup()
pager = Pager(PagingConfig(max_tokens=300, boundary="fixed_2"), PageStore(store))
messages, value = [], {}
for i in range(30):
    messages.append(HumanMessage(f"Day {i}: Mirela{i} counted {i * 7} swans on Lake Bohinj{i}.", id=f"h{i}"))
    result = pager.step(messages, value, "t")
    messages, value = result.apply(messages) + [AIMessage("Noted.", id=f"a{i}")], result.state.to_value()
import json; open(sys.argv[2], "w").write(json.dumps(value))
"""

READER = """
import json, sqlite3, sys
from langgraph.store.sqlite import SqliteStore
from langmem_paging import PagingConfig, PageStore
from langmem_paging.runtime.pager import Pager
from langmem_paging.index.sqlite import SqliteSearchIndex

def no_rebuild(*args, **kwargs):
    raise AssertionError("the index was rebuilt: pages were tokenized again")

SqliteSearchIndex.load = no_rebuild
store = SqliteStore(sqlite3.connect(sys.argv[1], check_same_thread=False, isolation_level=None))
pager = Pager(PagingConfig(max_tokens=300, boundary="fixed_2"), PageStore(store))
answer = pager.recall("t", json.loads(open(sys.argv[2]).read()), query="How many swans did Mirela3 count?")
print(answer.content)
"""


def _run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow
def test_a_new_process_searches_a_sqlite_thread_without_rebuilding_its_index(tmp_path):
    db, state = str(tmp_path / "pages.db"), str(tmp_path / "state.json")
    _run(WRITER, db, state)
    content = _run(READER, db, state)
    assert "Mirela3 counted 21 swans" in content


def test_a_file_backed_sqlite_store_gets_the_persistent_index_and_others_the_in_process_one(tmp_path):
    on_file = sqlite_store(str(tmp_path / "a.db"))
    assert sqlite_file_of(on_file) == str(tmp_path / "a.db")
    assert isinstance(default_index(on_file), SqliteSearchIndex)
    assert default_index(on_file) is default_index(on_file)  # one per store
    assert isinstance(default_index(sqlite_store(":memory:")), InMemoryBM25Index)
    assert isinstance(default_index(InMemoryStore()), InMemoryBM25Index)


def test_two_processes_writing_one_file_index_each_page_once(tmp_path):
    index_a, index_b = SqliteSearchIndex(str(tmp_path / "i.db")), SqliteSearchIndex(str(tmp_path / "i.db"))
    from langchain_core.messages import HumanMessage

    from langmem_paging.core.records import Page

    page = Page(
        id="p1",
        messages=[HumanMessage("We adopted a greyhound.", id="a")],
        bookmark="[p1:x]",
        keywords=[],
        token_count=5,
        boundary="fixed_2",
        created_turn=1,
    )
    index_a.load("t", [])
    index_a.add("t", [page])
    index_b.add("t", [page])  # the other worker formed it too (a retried step): indexed once
    assert index_b.has("t")
    assert len(index_b.search("t", "greyhound", limit=5, allow=lambda p: True)) == 1


def test_a_file_indexed_by_an_older_version_gains_per_thread_frequencies_and_its_high_water_mark(tmp_path):
    """Files written before `indexed_through` and the per-thread frequency table: both are derived
    once when the index opens the file, and search ranks as on a file indexed from the start."""
    import sqlite3

    from langchain_core.messages import HumanMessage

    from langmem_paging.core.records import Page

    def page(n: int, text: str) -> Page:
        return Page(
            id=f"p{n}",
            messages=[HumanMessage(text, id=f"m{n}")],
            bookmark=f"[p{n}:x]",
            keywords=[],
            token_count=5,
            boundary="fixed_2",
            created_turn=n,
        )

    pages = [
        page(1, "We adopted a greyhound."),
        page(2, "Pottery on Tuesday."),
        page(3, "The greyhound ate pottery."),
    ]
    path = str(tmp_path / "old.db")
    index = SqliteSearchIndex(path)
    index.load("t", pages)
    index.load("u", pages[:1])
    before = index.search("t", "greyhound pottery", limit=5, allow=lambda p: True)
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute(
        "ALTER TABLE langmem_paging_fts_threads DROP COLUMN through"
    )  # the schema an older version wrote
    raw.execute("DROP TABLE langmem_paging_fts_df")
    raw.close()
    reopened = SqliteSearchIndex(path)
    assert reopened.indexed_through("t") == 3 and reopened.indexed_through("u") == 1
    assert reopened.search("t", "greyhound pottery", limit=5, allow=lambda p: True) == before
