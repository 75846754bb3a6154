"""What forgetting one message and deleting a thread cost, by thread length (SQLite store + FTS5 index).

    python tools/bench_lifecycle.py [--pages 100,1000,5000] [--json out.json]

Per thread length: `PageStore.forget` (every page read, the holder and the clusters above it rewritten,
the index rows replaced; no state given) and `delete_thread` (records, claims, index rows). A step pays
nothing for either (the state is corrected at forget time), so no per-turn column. Prints a table and,
with --json, the same rows as JSON.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.store.sqlite import SqliteStore

from langmem_paging.core.records import ClusterNode, Page, messages_digest
from langmem_paging.core.state import PagingState
from langmem_paging.index.defaults import default_index
from langmem_paging.storage.page_store import PageStore


def _thread(pages: PageStore, thread: str, n: int) -> None:
    records = []
    for i in range(1, n + 1):
        text = f"Note {i}: my neighbour Zarko{i} keeps {i % 40} beehives near Lake Bled{i}."
        if i == n // 2:
            text = "My card is 4929 1234 5678 9012, under the name Quixotrix."
        messages = [HumanMessage(text, id=f"m{i}"), AIMessage("Noted.", id=f"a{i}")]
        records.append(
            Page(
                id=f"p{i}",
                messages=messages,
                bookmark=f"[p{i}:Zarko{i},beehives]",
                keywords=[f"Zarko{i}", "beehives"],
                token_count=30,
                boundary="fixed_2",
                created_turn=i,
                digest=messages_digest(messages),
            )
        )
    node = ClusterNode(
        id="c1",
        children=[p.id for p in records],
        size=n,
        first_page=1,
        last_page=n,
        bookmark=f"[c1:Quixotrix,beehives|p1-p{n}]",
        keywords=["Quixotrix", "beehives"],
        terms={"Quixotrix": 1.0, "beehives": 0.9},
    )
    state = PagingState()
    state.allocate("p", n)
    state.allocate("c", 1)
    for start in range(0, n, 500):
        pages.commit(
            thread, pages=records[start : start + 500], nodes=[node] if start == 0 else [], state=state
        )
    default_index(pages.store).load(thread, records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", default="100,1000,5000")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.pages.split(",")]:
            conn = sqlite3.connect(
                str(Path(tmp) / f"bench_{n}.sqlite"), check_same_thread=False, isolation_level=None
            )
            store = SqliteStore(conn)
            store.setup()
            pages = PageStore(store)
            _thread(pages, "t", n)
            start = time.perf_counter()
            changed = pages.forget("t", f"m{n // 2}")
            forget_s = time.perf_counter() - start
            assert changed == [f"p{n // 2}"]
            assert "Quixotrix" not in pages.get_cluster("t", "c1").bookmark  # type: ignore[union-attr]
            start = time.perf_counter()
            deleted = pages.delete_thread("t")
            delete_s = time.perf_counter() - start
            rows.append(
                {
                    "pages": n,
                    "forget_ms": round(forget_s * 1000, 1),
                    "delete_ms": round(delete_s * 1000, 1),
                    "records_deleted": deleted,
                }
            )
            conn.close()
    print(f"{'pages':>7} {'forget ms':>10} {'delete ms':>10} {'records':>8}")
    for row in rows:
        print(f"{row['pages']:>7} {row['forget_ms']:>10} {row['delete_ms']:>10} {row['records_deleted']:>8}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
