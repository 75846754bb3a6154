"""Paging deployed: the graphs served on one Postgres by several processes, under concurrent clients.

On 127.0.0.1 it starts a throwaway Postgres (tests/support/postgres_server.py) and, for the Agent
Server runtime, a throwaway Redis, then serves graphs/deploy_graph.py (a scripted model, with paging
and without; without, a stand-in `recall` that finds nothing, so both run the same steps) with each
runtime named (tools/deploy/servers.py):

* ``dev``: ``langgraph dev`` with a Postgres store and checkpointer by path from its ``langgraph.json``
  (one process); its checked run is followed by a server restart and a second round on the same threads;
* ``agent-server``: the stock ``langgraph-api`` on ``langgraph-runtime-pg`` (Postgres + Redis),
  ``langhost serve --workers N``, migrations run once before;
* ``app``: a plain multi-process app (``uvicorn --workers N``), each run under its thread's advisory lock.

Per runtime and worker count: one checked run (paging; a worker SIGKILLed mid-turn when there are
several, the clients retrying; a message forgotten while the load goes on), then ``--reps``
repetitions of a paging and a no-paging load, alternated, every run checked (tools/deploy/checks.py:
lossless, no turn lost even on the thread two clients share, no page number with two contents, no
page of another thread, the forgotten text nowhere). The server runtimes install the server app
(``langmem_paging.server:app``): ``GET /paging/ready`` must answer 200 before the load, the forget
goes through ``POST /paging/threads/{id}/forget``, and thread L0, deleted through the server at the
end (``DELETE /threads/{id}``), must leave no row in the library's tables. Prints a table (medians over repetitions) and
writes JSON. Bounded: ``--threads`` clients (+2 on a shared thread), ``--turns`` each, and
``--budget-s`` (the remaining combinations are skipped, and said so).

    python tools/bench_deploy.py                                    # all runtimes, 1/2/4 workers, 3 reps
    python tools/bench_deploy.py --runtimes app --workers 2 --reps 1 --turns 10 --json out.json

Targets (reported, not asserted): paging/no-paging throughput >= 0.9 and p95 <= 1.2 at 2 workers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.postgres_server import fresh_database, running_postgres  # noqa: E402
from tools.deploy.checks import Forgotten, check_load, rows_of_thread  # noqa: E402
from tools.deploy.load import AppTarget, Load, ServerTarget, close, run_load, secret  # noqa: E402
from tools.deploy.servers import RUNTIMES, Served, running_redis, serve  # noqa: E402

COLUMNS = [
    "runtime",
    "workers",
    "paging/s",
    "plain/s",
    "ratio",
    "p95 paging",
    "p95 plain",
    "p95 ratio",
    "problems",
]


def forget_message(uri: str, thread: str, message_id: str) -> list[str]:
    """Forget one message of a thread through the library on the database (store, indexes,
    checkpointed state); the pages changed. The plain app's way: it serves no ``/paging`` routes.
    It holds the thread's lock, as the app's runs do: its checkpoint write would otherwise race a run
    and fork the thread (the run's turn off the latest branch)."""
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.store.postgres import PostgresStore

    from langmem_paging import PageStore
    from tools.deploy.thread_lock import lock_key

    with psycopg.connect(uri, autocommit=True) as lock:  # released when the connection closes
        lock.execute("SELECT pg_advisory_lock(%s)", (lock_key(thread),))
        with PostgresStore.from_conn_string(uri) as store, PostgresSaver.from_conn_string(uri) as saver:
            return PageStore(store).forget(thread, message_id, checkpointer=saver)


async def _forget(target: Any, uri: str, thread: str, message_id: str) -> list[str]:
    """FORGET_HOOK: on a LangGraph server through its app's route ``POST /paging/threads/{id}/forget``
    (the worker that answers tells every worker's in-process index), else `forget_message`."""
    if not isinstance(target, ServerTarget):
        return await asyncio.to_thread(forget_message, uri, thread, message_id)
    answer = await target.paging("POST", f"/threads/{thread}/forget", json={"message_id": message_id})
    if answer.status_code != 200:
        raise RuntimeError(
            f"POST /paging/threads/{thread}/forget answered {answer.status_code}: {answer.text}"
        )
    return list(answer.json()["pages"])


def _target(served: Served) -> ServerTarget | AppTarget:
    return AppTarget(served.url) if served.runtime == "app" else ServerTarget(served.url)


async def _chaos(
    served: Served,
    uri: str,
    target: Any,
    out: list[Any],
    reconnects: list[warnings.WarningMessage],
    load: Load,
    l0_done: asyncio.Event,
) -> None:
    """A worker SIGKILLed a third of the way (several workers), and, once thread L0 is done, its
    turn-1 message forgotten, then searched for through the server (a recall by query)."""
    if served.workers > 1:
        while len(load.sent) < load.planned // 3:
            await asyncio.sleep(0.05)
        for _ in range(2 * served.workers):  # until a kill lands on a turn in flight (a client retried)
            out.append(("killed", served.kill_worker(prefer=getattr(target, "last_pid", None))))
            await asyncio.sleep(1.5)
            if _died_mid_turn(served, load, reconnects) or len(load.sent) >= load.planned:
                break
    await l0_done.wait()
    key, text, thread = f"L0-c0-{load.round}-1", secret("L0", "c0"), load.threads["L0"]
    pages = await _forget(target, uri, thread, key)
    out.append(Forgotten("L0", key, text, pages))
    await target.run(load.graph, thread, f"L0-c0-{load.round}-search", "SEARCH ZarkoL0x1 locker code")


async def _deleted(target: Any, uri: str, thread: str) -> list[str]:
    """``DELETE /threads/{id}`` through the server: no row of the thread left in the library's tables."""
    if not rows_of_thread(uri, thread):
        return [f"thread {thread} has no row in the library's tables: its deletion tests nothing"]
    try:
        await target.client.threads.delete(thread)
    finally:
        await close(target)
    left = rows_of_thread(uri, thread)
    return [f"thread {thread} deleted through the server: {n} row(s) left in {t}" for t, n in left.items()]


def _reconnects(caught: list[warnings.WarningMessage]) -> int:
    """The SDK's 'attempting reconnect' warnings among those caught."""
    return sum("attempting reconnect" in str(w.message) for w in caught)


def _died_mid_turn(served: Served, load: Load, reconnects: list[warnings.WarningMessage]) -> bool:
    """A killed worker was in a turn: a client retried it, or (the Agent Server) the SDK client
    reconnected to its run (a warning), or the runtime swept the run the dead worker held."""
    return bool(load.failures or _reconnects(reconnects)) or "Swept stale runs" in served.log.read_text(
        errors="replace"
    )


async def _checked_run(served: Served, uri: str, args: argparse.Namespace) -> dict[str, Any]:
    target, out, problems = _target(served), [], []
    try:
        if isinstance(target, ServerTarget):  # the server app answers before the load
            ready = await target.paging("GET", "/ready")
            if ready.status_code != 200:
                problems.append(f"GET /paging/ready answered {ready.status_code}: {ready.text[:300]}")
        with warnings.catch_warnings(record=True) as caught:  # the SDK warns when it reconnects
            warnings.simplefilter("always")
            load = await run_load(
                target,
                "paging",
                threads=args.threads,
                turns=args.turns,
                during=lambda ld, ev: _chaos(served, uri, target, out, caught, ld, ev),
            )
    finally:
        await close(target)
    forgotten = next(o for o in out if isinstance(o, Forgotten))
    killed = [o[1] for o in out if isinstance(o, tuple)]
    problems += check_load(uri, load, forgotten)
    if killed and not _died_mid_turn(served, load, caught):
        problems.append(f"{len(killed)} worker(s) killed, none mid-turn: the kill tested nothing")
    return {
        "load": load,
        "problems": problems,
        "killed": killed,
        "retried": sum(s.tries > 1 for s in load.sent),
        "swept": served.log.read_text(errors="replace").count("Swept stale runs"),
        "reconnected": _reconnects(caught),
        "forgotten": forgotten,
    }


async def _timed(
    served: Served, uri: str, graph: str, args: argparse.Namespace, *, threads: int = 0, turns: int = 0
) -> dict[str, Any]:
    target = _target(served)
    try:
        load = await run_load(target, graph, threads=threads or args.threads, turns=turns or args.turns)
    finally:
        await close(target)
    return {
        "graph": graph,
        "turns": len(load.sent),
        "seconds": round(load.seconds, 3),
        "throughput": round(load.throughput, 3),
        "p95_s": round(load.p95, 4),
        "retried": load.failures,
        "problems": check_load(uri, load),
    }


def _combination(
    runtime: str, workers: int, base_uri: str, redis_uri: str, args, workdir: Path
) -> dict[str, Any]:
    uri = fresh_database(base_uri, f"deploy_{runtime.replace('-', '_')}_{workers}")
    row: dict[str, Any] = {"runtime": runtime, "workers": workers, "runs": [], "problems": []}
    with serve(
        runtime, uri, workdir / f"{runtime}-{workers}", workers=workers, redis_uri=redis_uri
    ) as served:
        checked = asyncio.run(_checked_run(served, uri, args))
        load, forgotten = checked.pop("load"), checked.pop("forgotten")
        row.update(checked=checked | {"turns": len(load.sent), "forgotten": forgotten.key})
        row["problems"] += checked["problems"]
        if runtime == "agent-server":
            row["problems"] += asyncio.run(_deleted(_target(served), uri, load.threads["L0"]))
        if runtime != "dev":
            row["runs"] += _repetitions(served, uri, args)
    if runtime == "dev":  # the same threads go on after a restart: paging survives it
        with serve(runtime, uri, workdir / f"{runtime}-{workers}-restarted", workers=workers) as served:
            target = _target(served)
            after = asyncio.run(_after_restart(target, load, args))
            row["problems"] += [f"after restart: {p}" for p in check_load(uri, after, forgotten)]
            row["problems"] += asyncio.run(_deleted(_target(served), uri, load.threads["L0"]))
            row["runs"] += _repetitions(served, uri, args)
    row["problems"] += [p for run in row["runs"] for p in run["problems"]]
    return row | _summary(row["runs"])


def _repetitions(served: Served, uri: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """A short warm-up load of each graph (its first turns in each worker load code), then
    ``--reps`` paging/plain pairs, the order alternated."""
    runs = [
        asyncio.run(_timed(served, uri, graph, args, threads=1, turns=3)) | {"rep": -1}
        for graph in ("paging", "plain")
    ]
    for rep in range(args.reps):
        for graph in ("paging", "plain") if rep % 2 == 0 else ("plain", "paging"):
            runs.append(asyncio.run(_timed(served, uri, graph, args)) | {"rep": rep})
    return runs


async def _after_restart(target: Any, load: Load, args: argparse.Namespace) -> Load:
    try:
        return await run_load(
            target, "paging", threads=args.threads, turns=max(4, args.turns // 3), again=load
        )
    finally:
        await close(target)


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def median(graph: str, key: str) -> float:
        values = [r[key] for r in runs if r["graph"] == graph and r["rep"] >= 0]
        return statistics.median(values) if values else float("nan")

    paging, plain = median("paging", "throughput"), median("plain", "throughput")
    p95_paging, p95_plain = median("paging", "p95_s"), median("plain", "p95_s")
    return {
        "throughput_paging": paging,
        "throughput_plain": plain,
        "throughput_ratio": round(paging / plain, 3) if plain else None,
        "p95_paging_s": p95_paging,
        "p95_plain_s": p95_plain,
        "p95_ratio": round(p95_paging / p95_plain, 3) if p95_plain else None,
    }


def _table(rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        cells = [r["runtime"], r["workers"], f"{r['throughput_paging']:.2f}", f"{r['throughput_plain']:.2f}"]
        cells += [
            r["throughput_ratio"],
            f"{r['p95_paging_s']:.3f}",
            f"{r['p95_plain_s']:.3f}",
            r["p95_ratio"],
        ]
        cells.append(len(r["problems"]))
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def _plan(args: argparse.Namespace) -> list[tuple[str, int]]:
    return [
        (rt, 1) if rt == "dev" else (rt, w)
        for rt in args.runtimes
        for w in ([1] if rt == "dev" else args.workers)
    ]


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every combination within the budget; the report (rows, skipped, arguments)."""
    started, rows, skipped = time.monotonic(), [], []
    with (
        tempfile.TemporaryDirectory(prefix="bench-deploy-") as tmp,
        running_postgres(max_connections=args.max_connections) as base_uri,
        running_redis(Path(tmp))
        if "agent-server" in args.runtimes
        else contextlib.nullcontext("") as redis_uri,
    ):
        for runtime, workers in dict.fromkeys(_plan(args)):
            if time.monotonic() - started > args.budget_s:
                skipped.append(f"{runtime}/{workers}")
                continue
            rows.append(_combination(runtime, workers, base_uri, redis_uri, args, Path(tmp)))
            print(
                f"{runtime} x{workers}: {len(rows[-1]['problems'])} problem(s)", file=sys.stderr, flush=True
            )
    return {
        "rows": rows,
        "skipped": skipped,
        "seconds": round(time.monotonic() - started, 1),
        "args": vars(args),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtimes", nargs="+", choices=RUNTIMES, default=list(RUNTIMES))
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2, 4])
    parser.add_argument("--threads", type=int, default=4, help="threads of their own, one client each (>= 1)")
    parser.add_argument("--turns", type=int, default=24, help="turns per client")
    parser.add_argument("--reps", type=int, default=3, help="repetitions of the timed paging/plain pair")
    parser.add_argument("--budget-s", type=float, default=3600.0, help="start no combination after this")
    parser.add_argument("--max-connections", type=int, default=300)
    parser.add_argument("--json", help="write the report here")
    args = parser.parse_args(argv)
    if args.threads < 1:
        parser.error("--threads must be >= 1 (thread L0 is the one a message is forgotten on)")
    report = run(args)
    print(_table(report["rows"]))
    for row in report["rows"]:
        for problem in row["problems"][:20]:
            print(f"{row['runtime']} x{row['workers']}: {problem}")
    if report["skipped"]:
        print(f"skipped (over --budget-s): {', '.join(report['skipped'])}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))
    return 1 if any(row["problems"] for row in report["rows"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
