"""Search cold start: a fresh process's first search of a thread against a warm search, per index.

For each thread size it writes a thread's pages into a SQLite page store file (and the persistent
index's FTS5 table in the same file), then measures in new processes: the first search of the
thread (cold), then more searches in the same process (warm: p50/p95), and recall by id
(`PageStore.get_many` of one page, p95). `InMemoryBM25Index` rebuilds the thread from the store on
its first search; `SqliteSearchIndex` reads its FTS5 table. Prints a table and JSON; no target is
asserted (these machines are shared: compare the ratios of one run).

Usage (from the repository root)::

    python tools/bench_index.py --pages 1000,10000 --json results/bench_index.json
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage

WORDS = ["lake", "harbor", "violin", "festival", "orchard", "pottery", "marathon", "glacier", "saffron", "museum", "lantern", "cobalt", "meadow", "canyon", "tundra", "falcon", "puppy", "bicycle", "recipe", "painting", "garden", "concert", "adoption", "chess"]
MESSAGES_PER_PAGE = 10
QUERIES = ["How many swans did Mirela{n} count?", "Where did Ivo{n} play the violin?", "orchard harvest {n}"]


def _store(path: str):
    from langgraph.store.sqlite import SqliteStore

    store = SqliteStore(sqlite3.connect(path, check_same_thread=False, isolation_level=None))
    store.setup()
    return store


def write_thread(path: str, n_pages: int, seed: int = 0) -> None:
    """`n_pages` pages of a thread in the store file, indexed by the persistent index as they form."""
    from langmem_paging.records import Page
    from langmem_paging.search_sqlite import SqliteSearchIndex
    from langmem_paging.store import PageStore

    rng = random.Random(seed)
    page_store, index = PageStore(_store(path)), SqliteSearchIndex(path)
    for start in range(0, n_pages, 500):
        batch = []
        for n in range(start + 1, min(n_pages, start + 500) + 1):
            messages = []
            for k in range(MESSAGES_PER_PAGE):
                text = f"Day {n}.{k}: Mirela{n} and Ivo{n} " + " ".join(rng.choice(WORDS) for _ in range(18))
                messages.append((HumanMessage if k % 2 == 0 else AIMessage)(text, id=f"m{n}_{k}"))
            batch.append(Page(id=f"p{n}", messages=messages, bookmark=f"[p{n}:x]", keywords=[], token_count=300,
                              boundary="fixed_10", created_turn=n, order=n * MESSAGES_PER_PAGE))
        for page in batch:
            page_store.put("t", page)
        index.add("t", batch)


def measure(path: str, kind: str, n_pages: int, searches: int = 30) -> dict:
    """One fresh process's timings (run as a child process)."""
    from langmem_paging.search import InMemoryBM25Index
    from langmem_paging.search_sqlite import SqliteSearchIndex
    from langmem_paging.store import PageStore

    page_store = PageStore(_store(path))
    index = SqliteSearchIndex(path) if kind == "sqlite" else InMemoryBM25Index()
    rng = random.Random(1)

    def search() -> float:
        query = rng.choice(QUERIES).format(n=rng.randint(1, n_pages))
        start = time.perf_counter()
        if not index.has("t"):
            index.load("t", page_store.scan("t"))
        index.search("t", query, limit=64, allow=lambda p: True)
        return (time.perf_counter() - start) * 1000

    cold = search()
    warm = sorted(search() for _ in range(searches))
    by_id = []
    for _ in range(searches):
        start = time.perf_counter()
        page_store.get_many("t", [f"p{rng.randint(1, n_pages)}"])
        by_id.append((time.perf_counter() - start) * 1000)
    by_id.sort()
    return {"index": kind, "pages": n_pages, "first_search_ms": round(cold, 1),
            "warm_p50_ms": round(statistics.median(warm), 2), "warm_p95_ms": round(warm[int(0.95 * len(warm)) - 1], 2),
            "recall_by_id_p95_ms": round(by_id[int(0.95 * len(by_id)) - 1], 2),
            "cold_over_warm": round(cold / max(statistics.median(warm), 1e-9), 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", default="1000,10000", help="thread sizes in pages, comma-separated")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    parser.add_argument("--indexes", default="memory,sqlite", help="indexes to measure (memory, sqlite)")
    parser.add_argument("--child", nargs=3, metavar=("PATH", "INDEX", "PAGES"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child[0], args.child[1], int(args.child[2]))))
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n_pages in (int(x) for x in args.pages.split(",")):
            path = str(Path(tmp) / f"thread-{n_pages}.db")
            write_thread(path, n_pages)
            for kind in args.indexes.split(","):  # each in a fresh process: a restarted worker
                out = subprocess.run([sys.executable, __file__, "--child", path, kind, str(n_pages)],
                                     capture_output=True, text=True, check=True)
                rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print("| index | pages | first search (ms) | warm p50 | warm p95 | first/warm | recall by id p95 |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['index']} | {r['pages']} | {r['first_search_ms']} | {r['warm_p50_ms']} | {r['warm_p95_ms']} | "
              f"{r['cold_over_warm']}x | {r['recall_by_id_p95_ms']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run by path: the repo's package first
    main()
