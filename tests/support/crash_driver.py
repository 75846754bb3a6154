"""Crash campaigns: an agent process SIGKILLed at random points of paging and recall, resumed again and again
from the same SQLite files (SqliteStore + SqliteSaver) or the same PostgreSQL database (PostgresStore +
PostgresSaver).

The campaign process imports everything once, then forks one driver process per kill point. A driver
opens the store and the checkpointer, first checks what the previous (killed) drivers left, then
drives the agent (`scenario.build_agent`: a scripted model that sometimes calls ``recall``) on one
thread, appending each completed turn, with every message it produced, to ``turns.jsonl``. It dies:

- ``store k``: by SIGKILL sent to itself just before its k-th store call (during paging or a recall);
- ``checkpoint k``: just before its k-th checkpoint write (between a store commit and the checkpoint);
- ``timer s``: by the campaign, after s seconds (anywhere).

Each driver's check, before it sends anything (`check_resumed`):

- nothing lost: the history rebuilt from the latest checkpoint and the store holds every message
  of every logged turn, exactly (ids, types, contents), in order, and then at most the turn that was
  in flight when the previous driver died;
- no id reused: every page the branch owns is stored with exactly the messages at its place in
  that history (`scenario.check_branch`);
- the run resumes: a turn cut short is finished (``invoke(None)``), and every prompt the model gets
  afterwards is within the budget.

    python -m tests.support.crash_driver --backend sqlite --where /tmp/crash --kills 200 --seed 1 --timer
    python -m tests.support.crash_driver --backend postgres --where postgresql://... --kills 200 --timer

prints a JSON summary (the last line of stdout).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import sqlite3
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langmem_paging import PageStore
from langmem_paging.testing import FaultInjectingStore, kill_at, wrap_checkpointer_puts
from tests.support.scenario import (
    MAX_TOKENS,
    build_agent,
    check_branch,
    history_of,
    prompt_tokens,
    said,
    turn_message,
    turn_text,
)

THREAD = "crash"
CONFIG = {"configurable": {"thread_id": THREAD}}


# -- backends ----------------------------------------------------------------------------------------


@contextlib.contextmanager
def open_backend(backend: str, where: str) -> Iterator[tuple[Any, Any]]:
    """(store, checkpointer) on the SQLite files in directory `where`, or the Postgres database at URI `where`."""
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.store.sqlite import SqliteStore

        store_conn = sqlite3.connect(
            Path(where) / "store.sqlite", check_same_thread=False, isolation_level=None
        )
        saver_conn = sqlite3.connect(Path(where) / "checkpoints.sqlite", check_same_thread=False)
        try:
            store, saver = SqliteStore(store_conn), SqliteSaver(saver_conn)
            store.setup()
            saver.setup()
            yield store, saver
        finally:
            store_conn.close()
            saver_conn.close()
    elif backend == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(where) as store, PostgresSaver.from_conn_string(where) as saver:
            store.setup()
            saver.setup()
            yield store, saver
    else:
        raise ValueError(f"Unknown backend {backend!r}. Available: 'postgres', 'sqlite'.")


# -- the turn log ------------------------------------------------------------------------------------


def read_log(path: Path) -> list[dict]:
    """Completed turns; a line cut short by a kill is not a completed turn."""
    entries = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return entries


def _append(path: Path, record: dict) -> None:
    with open(path, "a") as out:
        out.write(json.dumps(record) + "\n")
        out.flush()


def _key(message: BaseMessage) -> list[str]:
    return [message.id, message.type, str(message.content)]


def _produced(agent, inputs, seen: set[str], durability: str) -> list[BaseMessage]:
    """Run a turn; the messages it produced (the model's and the tools'), in order."""
    out = []
    for chunk in agent.stream(inputs, CONFIG, stream_mode="updates", durability=durability):
        for update in chunk.values():
            updates = update if isinstance(update, (list, tuple)) else [update]
            for item in updates:
                messages = item.get("messages", []) if isinstance(item, dict) else []
                for m in messages if isinstance(messages, list) else [messages]:
                    if isinstance(m, (AIMessage, ToolMessage)) and m.id not in seen:
                        seen.add(m.id)
                        out.append(m)
    return out


# -- one driver ---------------------------------------------------------------------------------------


def check_resumed(agent, page_store: PageStore, log: list[dict]) -> tuple[Any, list[BaseMessage]]:
    """The checks a resumed driver makes before it sends anything (see the module docstring)."""
    snapshot = agent.get_state(CONFIG)
    history = check_branch(
        page_store, THREAD, snapshot.values, [e["text"] for e in log], in_flight=turn_text(len(log), THREAD)
    )
    logged = [m for entry in log for m in entry["messages"]]
    got = [_key(m) for m in history]
    if got[: len(logged)] != logged:
        first = (
            next(i for i, (a, b) in enumerate(zip(got, logged, strict=False)) if a != b)
            if len(got) >= len(logged)
            else len(got)
        )
        raise AssertionError(
            f"the history differs from the logged turns at message {first}: "
            f"{got[first] if first < len(got) else None} != {logged[first]}"
        )
    return snapshot, history


def drive(
    backend: str,
    where: str,
    *,
    kill: tuple[str, float] | None,
    turns: int,
    results: Path,
    durability: str = "async",
) -> int:
    """A driver process: check what is there, finish a turn cut short, take `turns` more turns."""
    log_path = Path(results).with_name("turns.jsonl")
    with open_backend(backend, where) as (base, saver):
        store = base
        if kill and kill[0] == "store":
            store = FaultInjectingStore(base)
            store.on_call = kill_at(
                int(kill[1]),
                before=lambda: _append(
                    Path(results).with_name("kills.jsonl"), {"kill": kill, "phase": store.phases[-1]}
                ),
            )
        if kill and kill[0] == "checkpoint":
            wrap_checkpointer_puts(
                saver,
                kill_at(
                    int(kill[1]),
                    before=lambda: _append(
                        Path(results).with_name("kills.jsonl"), {"kill": kill, "phase": "checkpoint"}
                    ),
                ),
            )
        agent, paging, model = build_agent(store, saver)
        page_store = PageStore(base)
        log = read_log(log_path)
        record: dict[str, Any] = {"pid": os.getpid(), "kill": kill, "logged_turns": len(log)}
        try:
            snapshot, history = check_resumed(agent, page_store, log)
            record["in_flight"] = len(said(history)) > len(log)
            record["cut_short"] = [t.name for t in snapshot.tasks]  # the run the previous driver died in
        except Exception as error:  # noqa: BLE001 - the campaign reports it
            record.update(
                ok=False, error=f"{type(error).__name__}: {error}", trace=traceback.format_exc()[-2000:]
            )
            _append(results, record)
            return 1
        record["ok"] = True
        _append(results, record)
        seen = {m.id for m in history}
        # Finish a run the previous driver was killed in. `snapshot.next` alone does not tell: a step
        # whose task writes were saved, but not the checkpoint after it, shows no next task (only a
        # task with a result), and new input on top of it would drop those writes.
        if snapshot.next or snapshot.tasks:
            _produced(agent, None, seen, durability)
        values = agent.get_state(CONFIG).values
        if len(said(history_of(page_store, THREAD, values))) > len(log):
            finished = check_branch(
                page_store, THREAD, values, [*[e["text"] for e in log], turn_text(len(log), THREAD)]
            )
            logged = sum(len(e["messages"]) for e in log)
            _append(
                log_path,
                {
                    "turn": len(log),
                    "text": turn_text(len(log), THREAD),
                    "resumed": True,
                    "messages": [_key(m) for m in finished[logged:]],
                    "max_prompt": max((prompt_tokens(p, paging) for p in model.prompts), default=0),
                },
            )
            log = read_log(log_path)
        for n in range(len(log), len(log) + turns):
            first = len(model.prompts)
            message = turn_message(n, THREAD)
            seen.add(message.id)
            produced = _produced(agent, {"messages": [message]}, seen, durability)
            _append(
                log_path,
                {
                    "turn": n,
                    "text": message.content,
                    "messages": [_key(m) for m in [message, *produced]],
                    "max_prompt": max((prompt_tokens(p, paging) for p in model.prompts[first:]), default=0),
                },
            )
    return 0


# -- the campaign --------------------------------------------------------------------------------------


def _fork(target, *args, **kwargs) -> int:
    pid = os.fork()
    if pid == 0:  # the driver: never return into the campaign's code
        code = 1
        try:
            code = target(*args, **kwargs)
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def campaign(
    backend: str,
    where: str,
    *,
    logs: str | Path,
    kills: int,
    seed: int = 1,
    timer: bool = False,
    durability: str = "async",
    turns_per_driver: int = 5,
    final_turns: int = 4,
) -> dict[str, Any]:
    """Fork `kills` drivers, each killed at a random point, then one that is not; return the summary.

    `where`: the SQLite directory or the Postgres URI; `logs`: a directory for the turn log and checks."""
    rng = random.Random(seed)
    base = Path(logs)
    base.mkdir(parents=True, exist_ok=True)
    results = base / "results.jsonl"
    for stale in (results, base / "turns.jsonl", base / "kills.jsonl"):
        stale.unlink(missing_ok=True)
    kinds = ["store", "checkpoint"] + (["timer"] if timer else [])
    outcomes = {"killed": 0, "exited": 0, "failed": 0}
    started = time.monotonic()
    for _ in range(kills):
        kind = rng.choice(kinds)
        if kind == "store":
            kill: tuple[str, float] = ("store", rng.randint(1, 6))
        elif kind == "checkpoint":
            kill = ("checkpoint", rng.randint(1, 35))
        else:
            kill = ("timer", round(rng.uniform(0.05, 1.5), 3))
        pid = _fork(
            drive,
            backend,
            where,
            kill=None if kind == "timer" else kill,
            turns=turns_per_driver,
            results=results,
            durability=durability,
        )
        if kind == "timer":
            deadline = time.monotonic() + kill[1]
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.005)
            if pid not in _reaped:
                os.kill(pid, signal.SIGKILL)
        status = _reaped.pop(pid) if pid in _reaped else os.waitpid(pid, 0)[1]
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            outcomes["killed"] += 1
        elif os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            outcomes["exited"] += 1
        else:
            outcomes["failed"] += 1
    pid = _fork(drive, backend, where, kill=None, turns=final_turns, results=results, durability=durability)
    _, status = os.waitpid(pid, 0)
    final_ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    checks = [json.loads(line) for line in results.read_text().splitlines()]
    log = read_log(base / "turns.jsonl")
    failures = [c for c in checks if not c["ok"]]
    landed = read_log(base / "kills.jsonl")
    return {
        "backend": backend,
        "seed": seed,
        "durability": durability,
        "kill points": kills,
        "kinds": kinds,
        "drivers killed": outcomes["killed"],
        "killed at a store call in a paging step": sum(k["phase"] == "step" for k in landed),
        "killed at a store call in a recall": sum(k["phase"] == "recall" for k in landed),
        "killed at a checkpoint write": sum(k["phase"] == "checkpoint" for k in landed),
        "drivers finished before their kill point": outcomes["exited"],
        "drivers failed": outcomes["failed"],
        "checks": len(checks),
        "check failures": len(failures),
        "failures": failures[:3],
        "resumed an in-flight turn": sum(bool(c.get("in_flight")) for c in checks),
        "resumed a run cut short": sum(bool(c.get("cut_short")) for c in checks),
        "turns completed": len(log),
        "max prompt tokens": max((e["max_prompt"] for e in log), default=0),
        "budget": MAX_TOKENS,
        "final driver ok": final_ok and checks[-1]["ok"],
        "seconds": round(time.monotonic() - started, 1),
    }


_reaped: dict[int, int] = {}


def _alive(pid: int) -> bool:
    """Reap `pid` if it has exited (keeping its status); True if it still has to be waited for."""
    got, status = os.waitpid(pid, os.WNOHANG)
    if got == 0:
        return True
    _reaped[pid] = status
    return False


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres"], required=True)
    parser.add_argument("--where", required=True, help="a directory (sqlite) or a database URI (postgres)")
    parser.add_argument("--logs", help="directory for the turn log and the checks (default: --where)")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timer", action="store_true", help="also kill at random times (not deterministic)")
    parser.add_argument(
        "--durability",
        choices=["sync", "async", "exit"],
        default="async",
        help="LangGraph checkpoint durability (sync: every step saved before the next starts)",
    )
    parser.add_argument("--turns-per-driver", type=int, default=5)
    args = parser.parse_args(argv)
    summary = campaign(
        args.backend,
        args.where,
        logs=args.logs or args.where,
        kills=args.kills,
        seed=args.seed,
        timer=args.timer,
        durability=args.durability,
        turns_per_driver=args.turns_per_driver,
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
