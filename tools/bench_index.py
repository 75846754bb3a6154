"""Search and recall by id per index, side by side: in-process BM25, SQLite FTS5, PostgreSQL.

For each thread size it writes one thread's pages into a page store and its index as they form:
a SQLite store file (with the FTS5 table in the same file; the in-process index reads the same
store) and a PostgreSQL database on a throwaway server (`tests/support/postgres_server.py`: the
store's table and the passages of its own index, `PostgresSearchIndex.for_store`: what a store with no
``index=`` gets). Then, in a new process per index (a restarted worker; ``--reps`` of them, the
median of each figure reported), after the process's first store read (a turn reads the store
before any recall), it measures the first search of the thread (cold), the first search of the
thread once the process has searched and forgot what it held of it (what a worker pays per thread it
has not searched yet), more searches
(warm: p50/p95), and recall by id (`PageStore.get_many` of one page, p95). `InMemoryBM25Index` rebuilds the thread from
the store on its first search; the SQLite and Postgres indexes read their tables. Prints a table
(with each size's ingest time) and JSON; no target is asserted (these machines are shared: compare
the ratios of one run).

Usage (from the repository root)::

    python tools/bench_index.py --pages 1000,10000,100000 --json results/bench_index.json
    python tools/bench_index.py --pages 10000 --indexes postgres --reps 5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage

WORDS = [
    "lake",
    "harbor",
    "violin",
    "festival",
    "orchard",
    "pottery",
    "marathon",
    "glacier",
    "saffron",
    "museum",
    "lantern",
    "cobalt",
    "meadow",
    "canyon",
    "tundra",
    "falcon",
    "puppy",
    "bicycle",
    "recipe",
    "painting",
    "garden",
    "concert",
    "adoption",
    "chess",
]
MESSAGES_PER_PAGE = 10
QUERIES = ["How many swans did Mirela{n} count?", "Where did Ivo{n} play the violin?", "orchard harvest {n}"]
INDEXES = ("memory", "sqlite", "postgres")
BATCH = 500


def _sqlite_store(path: str):
    from langgraph.store.sqlite import SqliteStore

    store = SqliteStore(sqlite3.connect(path, check_same_thread=False, isolation_level=None))
    store.setup()
    return store


@contextlib.contextmanager
def _postgres_store(uri: str) -> Iterator[Any]:
    """A `PostgresStore` on a small pool with the settings LangGraph requires (as an app keeps one)."""
    from langgraph.store.postgres import PostgresStore
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    kwargs = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with ConnectionPool(uri, min_size=1, max_size=4, kwargs=kwargs, open=True) as pool:
        store = PostgresStore(pool)
        store.setup()
        yield store


def _pages(n_pages: int, seed: int = 0) -> Iterator[list]:
    from langmem_paging.core.records import Page

    rng = random.Random(seed)
    for start in range(0, n_pages, BATCH):
        batch = []
        for n in range(start + 1, min(n_pages, start + BATCH) + 1):
            messages = []
            for k in range(MESSAGES_PER_PAGE):
                text = f"Day {n}.{k}: Mirela{n} and Ivo{n} " + " ".join(rng.choice(WORDS) for _ in range(18))
                messages.append((HumanMessage if k % 2 == 0 else AIMessage)(text, id=f"m{n}_{k}"))
            batch.append(
                Page(
                    id=f"p{n}",
                    messages=messages,
                    bookmark=f"[p{n}:x]",
                    keywords=[],
                    token_count=300,
                    boundary="fixed_10",
                    created_turn=n,
                    order=n * MESSAGES_PER_PAGE,
                )
            )
        yield batch


def _write(store: Any, index: Any, n_pages: int) -> None:
    """The pages in the store (one batch of puts per 500 pages, as `PageStore.put` writes each) and
    the index."""
    from langgraph.store.base import PutOp

    from langmem_paging.storage.page_store import thread_namespace

    for batch in _pages(n_pages):
        store.batch([PutOp(thread_namespace("t", "pages"), p.id, p.to_dict(), index=False) for p in batch])
        index.add("t", batch)


def write_sqlite(path: str, n_pages: int) -> None:
    from langmem_paging.index.sqlite import SqliteSearchIndex

    _write(_sqlite_store(path), SqliteSearchIndex(path), n_pages)


def write_postgres(uri: str, n_pages: int) -> None:
    from langmem_paging.index.defaults import default_index

    with _postgres_store(uri) as store:
        _write(store, default_index(store), n_pages)  # the store's own index, on its pool


def measure(where: str, kind: str, n_pages: int, searches: int = 100) -> dict:
    """One fresh process's timings (run as a child process)."""
    with contextlib.ExitStack() as stack:
        if kind == "postgres":
            from langmem_paging.index.defaults import default_index

            store = stack.enter_context(_postgres_store(where))
            index: Any = default_index(store)
        else:
            from langmem_paging.index.base import InMemoryBM25Index
            from langmem_paging.index.sqlite import SqliteSearchIndex

            store = _sqlite_store(where)
            index = SqliteSearchIndex(where) if kind == "sqlite" else InMemoryBM25Index()
        return _timings(store, index, kind, n_pages, searches)


def _forget_thread(index: Any, kind: str) -> None:
    """Drop what the process holds of thread ``t`` (as for a thread it never searched): the
    in-process index's rows; the Postgres index's cached `indexed_through`; nothing for SQLite."""
    if kind == "memory":
        index.drop("t")
    elif kind == "postgres":
        index._through.pop("t")


def _timings(store: Any, index: Any, kind: str, n_pages: int, searches: int) -> dict:
    from langmem_paging.storage.page_store import PageStore

    page_store = PageStore(store)
    rng = random.Random(1)

    def search() -> float:
        query = rng.choice(QUERIES).format(n=rng.randint(1, n_pages))
        start = time.perf_counter()
        if not index.has("t"):
            index.load("t", page_store.scan("t"))
        index.search("t", query, limit=64, allow=lambda p: True)
        return (time.perf_counter() - start) * 1000

    page_store.get_many("t", ["p1"])  # the worker's first store read (a turn reads before any recall)
    cold = search()
    warm = sorted(search() for _ in range(searches))
    by_id = []
    for _ in range(searches):
        page_id = f"p{rng.randint(1, n_pages)}"
        start = time.perf_counter()
        found = page_store.get_many("t", [page_id])
        by_id.append((time.perf_counter() - start) * 1000)
        assert page_id in found, f"{page_id} missing from the {kind} store"
    by_id.sort()
    _forget_thread(index, kind)  # a thread this worker never searched, in a process that has searched
    thread_cold = search()
    return {
        "index": kind,
        "pages": n_pages,
        "first_search_ms": round(cold, 1),
        "thread_first_search_ms": round(thread_cold, 1),
        "warm_p50_ms": round(statistics.median(warm), 2),
        "warm_p95_ms": round(_p95(warm), 2),
        "recall_by_id_p50_ms": round(statistics.median(by_id), 2),
        "recall_by_id_p95_ms": round(_p95(by_id), 2),
        "cold_over_warm": round(cold / max(statistics.median(warm), 1e-9), 1),
        "thread_cold_over_warm": round(thread_cold / max(statistics.median(warm), 1e-9), 1),
    }


def _p95(sorted_ms: list[float]) -> float:
    return sorted_ms[max(0, int(0.95 * len(sorted_ms)) - 1)]


def _child(where: str, kind: str, n_pages: int, timeout: float) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", where, kind, str(n_pages)],
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median_of(runs: list[dict]) -> dict:
    """The median of each figure over fresh processes (the first search varies most)."""
    if len(runs) == 1 or any("timed_out_s" in r for r in runs):
        return runs[0]
    row = dict(runs[0])
    for key, value in runs[0].items():
        if isinstance(value, float):
            row[key] = round(statistics.median(r[key] for r in runs), 2)
    row["cold_over_warm"] = round(row["first_search_ms"] / max(row["warm_p50_ms"], 1e-9), 1)
    row["thread_cold_over_warm"] = round(row["thread_first_search_ms"] / max(row["warm_p50_ms"], 1e-9), 1)
    row["reps"] = len(runs)
    return row


def run(sizes: list[int], kinds: list[str], timeout: float, reps: int = 1) -> tuple[list[dict], list[dict]]:
    """Rows per (size, index), and the ingest time of each size per store."""
    rows, ingest = [], []
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        server = None
        if "postgres" in kinds:
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
            from tests.support.postgres_server import fresh_database, running_postgres

            server = stack.enter_context(running_postgres())
        for n_pages in sizes:
            where = {}
            if {"memory", "sqlite"} & set(kinds):
                path = str(Path(tmp) / f"thread-{n_pages}.db")
                start = time.perf_counter()
                write_sqlite(path, n_pages)
                ingest.append(
                    {"store": "sqlite", "pages": n_pages, "seconds": round(time.perf_counter() - start, 1)}
                )
                where["memory"] = where["sqlite"] = path
            if server is not None:
                uri = fresh_database(server, f"bench_{n_pages}")
                start = time.perf_counter()
                write_postgres(uri, n_pages)
                ingest.append(
                    {"store": "postgres", "pages": n_pages, "seconds": round(time.perf_counter() - start, 1)}
                )
                where["postgres"] = uri
            for kind in kinds:  # each in a fresh process: a restarted worker
                runs = []
                for _ in range(reps):
                    try:
                        runs.append(_child(where[kind], kind, n_pages, timeout))
                    except subprocess.TimeoutExpired:
                        runs.append({"index": kind, "pages": n_pages, "timed_out_s": timeout})
                        break
                rows.append(_median_of(runs))
    return rows, ingest


def table(rows: list[dict], ingest: list[dict]) -> str:
    lines = [
        "| index | pages | first search in the process (ms) | first/warm | first search of the thread, "
        "warm process | first/warm | warm p50 | warm p95 | recall by id p50 | p95 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "timed_out_s" in r:
            lines.append(
                f"| {r['index']} | {r['pages']} | timed out after {r['timed_out_s']} s | | | | | | | |"
            )
            continue
        lines.append(
            f"| {r['index']} | {r['pages']} | {r['first_search_ms']} | {r['cold_over_warm']}x | "
            f"{r['thread_first_search_ms']} | {r['thread_cold_over_warm']}x | {r['warm_p50_ms']} | "
            f"{r['warm_p95_ms']} | {r['recall_by_id_p50_ms']} | {r['recall_by_id_p95_ms']} |"
        )
    lines += ["", "| store | pages | ingest (s) |", "|---|---|---|"]
    lines += [f"| {i['store']} | {i['pages']} | {i['seconds']} |" for i in ingest]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pages", default="1000,10000,100000", help="thread sizes in pages, comma-separated")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    parser.add_argument(
        "--indexes", default=",".join(INDEXES), help=f"indexes to measure ({', '.join(INDEXES)})"
    )
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds one index's measurement may take"
    )
    parser.add_argument("--reps", type=int, default=1, help="fresh processes per index and size (medians)")
    parser.add_argument("--child", nargs=3, metavar=("WHERE", "INDEX", "PAGES"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child[0], args.child[1], int(args.child[2]))))
        return
    kinds = args.indexes.split(",")
    unknown = [k for k in kinds if k not in INDEXES]
    if unknown:
        parser.error(f"Unknown index {unknown[0]!r}. Available: {', '.join(repr(k) for k in INDEXES)}.")
    rows, ingest = run([int(x) for x in args.pages.split(",")], kinds, args.timeout, args.reps)
    print(table(rows, ingest))
    print(json.dumps({"rows": rows, "ingest": ingest}))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "ingest": ingest}, indent=2))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run by path: the repo's package first
    main()
