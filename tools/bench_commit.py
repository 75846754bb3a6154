"""A paging turn against a plain turn on a SQLite file store, side by side for two versions of the library.

A turn is one `invoke` of an agent (`create_agent`, a scripted model, `PagingMiddleware` with no
`index=`) on SQLite files: a `SqliteStore` (its default index: FTS5 in the same file) and a
`SqliteSaver`, a pair of files per run. A paging turn forms a page (its numbers claimed, its
records written, its passages indexed); a plain turn forms none. Each version runs in a process of
its own, on the same conversation, alternating in the same run: the current working tree and the
library of ``--baseline`` (a git revision, extracted to a temporary folder). Prints a table of the
median turn of each kind and their ratio; no target is asserted (a shared machine: compare the
rows of one run).

A paging step evicts down to the low-water mark (``--low-water``, a fraction of ``--budget``), so the
pages a paging turn forms, and its cost, grow with the budget: the table gives pages per paging turn,
and the mean of all turns (a lower mark pages in bigger, rarer steps). ``--boundary`` sets the page
size (default ``fixed_4``; the library's default is ``fixed_20``). The store SQL column is the time
a paging turn spends in the store connection's statements, COMMIT included (the median over paging
turns): what the turn costs before any of the library's Python.

Usage (from the repository root)::

    python tools/bench_commit.py --baseline main --turns 200 --reps 3
    python tools/bench_commit.py --baseline main --turns 400 --reps 3 --budget 4000
    python tools/bench_commit.py --baseline main --turns 400 --reps 3 --boundary fixed_20
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class _TimedCursor(sqlite3.Cursor):
    """A cursor that adds the wall time of each statement to its connection's `spent`."""

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        return _timed(self.connection, super().execute, sql, *args)

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
        return _timed(self.connection, super().executemany, sql, *args)


class _TimedConnection(sqlite3.Connection):
    """The store's connection, timing every statement (COMMIT included) in `spent` (seconds)."""

    spent = 0.0

    def cursor(self, factory: Any = _TimedCursor) -> sqlite3.Cursor:
        return super().cursor(factory)

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        return _timed(self, super().execute, sql, *args)

    def executemany(self, sql: str, *args: Any) -> sqlite3.Cursor:
        return _timed(self, super().executemany, sql, *args)


def _timed(conn: Any, call: Any, *args: Any) -> Any:
    start = time.perf_counter()
    try:
        return call(*args)
    finally:
        conn.spent += time.perf_counter() - start


def measure(
    folder: str,
    turns: int,
    wal: bool = False,
    budget: int = 600,
    low_water: float = 0.75,
    boundary: str = "fixed_4",
) -> dict[str, float]:
    """Median milliseconds of a paging turn and of a plain turn (run in a child process)."""
    from langchain.agents import create_agent
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.store.sqlite import SqliteStore

    from langmem_paging import PagingMiddleware
    from langmem_paging.core.state import PagingState
    from langmem_paging.testing import ScriptedChatModel

    def connect(name: str, factory: type[sqlite3.Connection] = sqlite3.Connection) -> Any:
        conn = sqlite3.connect(
            str(Path(folder) / name), check_same_thread=False, isolation_level=None, factory=factory
        )
        if wal:  # the files in write-ahead-log mode: one sync per commit, at most
            conn.execute("PRAGMA journal_mode=WAL")
        return conn

    store_conn = connect("store.db", _TimedConnection)
    store = SqliteStore(store_conn)
    store.setup()
    saver = SqliteSaver(connect("checkpoints.db"))
    paging = PagingMiddleware(
        max_tokens=budget, low_water_tokens=("fraction", low_water), boundary=boundary, store=store
    )
    model = ScriptedChatModel(responses=[f"Noted, day {i}." for i in range(turns)])
    agent = create_agent(model, middleware=[paging], checkpointer=saver, store=store)
    config = {"configurable": {"thread_id": "t"}}
    paged: list[float] = []
    plain: list[float] = []
    pages: list[int] = []
    sql: list[float] = []
    formed = 1
    for i in range(turns):
        store_conn.spent = 0.0
        start = time.perf_counter()
        state = agent.invoke(
            {"messages": [f"Day {i}: Mirela{i} counted {i * 7} swans on Lake Bohinj{i}."]}, config
        )
        elapsed = (time.perf_counter() - start) * 1000
        now = PagingState.from_value(state.get("paging")).next["p"]
        if i >= 10 and now > formed:  # past the first pages (connections, statements, the tables made)
            paged.append(elapsed)
            pages.append(now - formed)
            sql.append(store_conn.spent * 1000)
        elif i >= 10:
            plain.append(elapsed)
        formed = now
    return {
        "paging_ms": statistics.median(paged),
        "plain_ms": statistics.median(plain),
        "paging_turns": len(paged),
        "plain_turns": len(plain),
        "pages_per_paging_turn": statistics.mean(pages),
        "mean_ms": statistics.mean(paged + plain),
        "paging_sql_ms": statistics.median(sql),
    }


def _child(library: Path, folder: str, options: dict[str, Any]) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": f"{library}{os.pathsep}{ROOT}"}
    code = (
        "import json, sys; from tools.bench_commit import measure; "
        "print(json.dumps(measure(sys.argv[1], **json.loads(sys.argv[2]))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, folder, json.dumps(options)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=library,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _extract(revision: str, into: Path) -> Path:
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "langmem_paging"], capture_output=True, check=True
    ).stdout
    into.mkdir(parents=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="main", help="git revision to compare with (default: main)")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3, help="runs of each version, alternating")
    parser.add_argument("--wal", action="store_true", help="put both files in write-ahead-log mode")
    parser.add_argument(
        "--budget",
        type=int,
        default=600,
        help="max_tokens (default 600): a paging step evicts down to the low-water mark, so a larger budget "
        "forms more pages in a paging turn",
    )
    parser.add_argument(
        "--low-water",
        type=float,
        default=0.75,
        help="low_water_tokens as a fraction of the budget (default 0.75, the library's default)",
    )
    parser.add_argument(
        "--boundary",
        default="fixed_4",
        help="the page boundary (default fixed_4: small pages, the most pages a paging turn forms; the "
        "library's default is fixed_20)",
    )
    args = parser.parse_args()
    rows: dict[str, list[dict[str, float]]] = {args.baseline: [], "working tree": []}
    options = {k: v for k, v in vars(args).items() if k not in ("baseline", "reps")}  # measure's keywords
    with tempfile.TemporaryDirectory() as tmp:
        baseline = _extract(args.baseline, Path(tmp) / "baseline")
        libraries = {args.baseline: baseline, "working tree": ROOT}
        for rep in range(args.reps):
            for name, library in libraries.items():
                folder = Path(tmp) / f"{name.replace(' ', '_')}-{rep}"
                folder.mkdir()
                rows[name].append(_child(library, str(folder), options))
    print(
        "| library | paging turn p50 (ms) | plain turn p50 (ms) | paging / plain | pages per paging turn "
        "| mean turn (ms) | store SQL in a paging turn p50 (ms) | turns (paging + plain) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, runs in rows.items():
        paging = statistics.median(r["paging_ms"] for r in runs)
        plain = statistics.median(r["plain_ms"] for r in runs)
        count = f"{int(runs[0]['paging_turns'])} + {int(runs[0]['plain_turns'])}"
        per = statistics.mean(r["pages_per_paging_turn"] for r in runs)
        mean = statistics.median(r["mean_ms"] for r in runs)
        sql = statistics.median(r["paging_sql_ms"] for r in runs)
        print(
            f"| {name} | {paging:.1f} | {plain:.1f} | {paging / plain:.2f} | {per:.1f} | {mean:.1f} "
            f"| {sql:.1f} | {count} x {len(runs)} runs |"
        )


if __name__ == "__main__":
    main()
